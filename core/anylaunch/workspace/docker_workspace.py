"""Docker workspaces: the role's image with the local project copied in, built on demand.

:class:`DockerWorkspaceMixin` turns a :class:`~anylaunch.specs.Workspace` into a *plan*
(:class:`WorkspaceImageBuild`) when the app is dry-run: the files that go into the image are
collected (each project's ``.dockerignore`` honoured), hashed, and the role's image is
pointed at a tag named by that hash. Nothing is built or pushed by the dryrun: the scheduler
carries the plan in its request and :meth:`DockerWorkspaceMixin.build_workspace_images` runs
it at schedule time, skipping the build when the engine already has the tag (built from the
same base image), and pushing to ``image_repo`` when one is set.

The image is built ``FROM`` the role's image. By default the workspace is copied into the
image's working directory; a ``Dockerfile.anylaunch`` at the workspace root replaces that
default (it gets the build args ``IMAGE``, the role's image, and ``WORKSPACE``, the local
path), with the workspace as its build context.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
import stat
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from anylaunch.sdk import require_sdk
from anylaunch.specs.api import AppDef, Role, Workspace
from anylaunch.specs.errors import AnylaunchError, InvalidRunConfigException, InvalidSpecError
from anylaunch.specs.runopts import CfgVal, runopts
from anylaunch.specs.structured_opts import StructuredOpts
from anylaunch.workspace.api import WorkspaceMixin

__all__ = [
    "DEFAULT_DOCKERFILE",
    "IGNORE_FILE",
    "LOCAL_REPOSITORY",
    "WORKSPACE_DOCKERFILE",
    "DockerIgnore",
    "DockerWorkspaceMixin",
    "DockerWorkspaceOpts",
    "WorkspaceBuildError",
    "WorkspaceImageBuild",
    "check_image_repo",
    "plan_workspace_image",
]

log: logging.Logger = logging.getLogger(__name__)

#: A Dockerfile with this name at the workspace root replaces the default one.
WORKSPACE_DOCKERFILE = "Dockerfile.anylaunch"
#: Each project's ignore file (Docker's syntax and matching rules).
IGNORE_FILE = ".dockerignore"
#: Repository of workspace images when no ``image_repo`` is set (the tag is the content hash).
LOCAL_REPOSITORY = "anylaunch-workspace"
#: The default Dockerfile: the workspace (under ``workspace/`` in the build context, so the
#: Dockerfile itself stays out of the image) copied into the base image's working directory.
DEFAULT_DOCKERFILE = "ARG IMAGE\nFROM $IMAGE\nCOPY workspace/ ./\n"
LABEL_CONTENT_HASH = "anylaunch.workspace.content-hash"
LABEL_BASE_IMAGE_ID = "anylaunch.workspace.base-image-id"
_HASH_VERSION = b"anylaunch-docker-workspace-v1\n"
_TAG_LENGTH = 24
# the repository part of an image reference: [host[:port]/]path, lowercase path components
_REPOSITORY = re.compile(
    r"^(?:(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9-]+)*(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)
_PLANS_ATTR = "_anylaunch_workspace_builds"


class WorkspaceBuildError(AnylaunchError):
    """Building or pushing a workspace image failed (the message quotes the engine)."""


@dataclass
class DockerWorkspaceOpts(StructuredOpts):
    """Run options of the Docker workspace (merged into the scheduler's run options)."""

    image_repo: str | None = None
    """Repository to push workspace images to, e.g. registry.example.com/team/app (the tag is the workspace's content hash); the engine must be logged in to it. Unset: the image stays in the local engine."""


# ---------------------------------------------------------------------------------------------
# .dockerignore
# ---------------------------------------------------------------------------------------------


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """Docker's translation of one ignore pattern into an anchored regular expression."""
    out = ""
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            if pattern[i + 1 : i + 2] == "*":
                i += 1
                if pattern[i + 1 : i + 2] == "/":
                    i += 1  # "**/" is "**"
                out += ".*" if i + 1 >= len(pattern) else "(.*/)?"
            else:
                out += "[^/]*"
        elif ch == "?":
            out += "[^/]"
        elif ch == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        elif ch in ".+()|{}$":
            out += "\\" + ch
        else:
            out += ch  # includes [...] classes, as in Go's filepath.Match
        i += 1
    return re.compile(f"^{out}$")


@dataclass
class DockerIgnore:
    """Docker's ``.dockerignore`` rules: which context paths stay out of the image.

    Patterns match whole paths relative to the context root (``*`` and ``?`` never cross
    ``/``, ``**`` spans directories); a path is also excluded when a pattern matches one of
    its parent directories; the last matching pattern wins and ``!`` re-includes.

    >>> rules = DockerIgnore.parse("# build output\\n*.pyc\\nbuild/\\n**/secret*\\n!build/keep.txt\\n")
    >>> [p for p in ["a.pyc", "src/a.pyc", "build/x", "build/keep.txt", "src/secret.key"]
    ...  if rules.excludes(p)]
    ['a.pyc', 'build/x', 'src/secret.key']
    """

    patterns: list[tuple[bool, re.Pattern[str]]] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> DockerIgnore:
        """Parses the text of a ``.dockerignore`` file."""
        import posixpath

        patterns: list[tuple[bool, re.Pattern[str]]] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            if negate:
                line = line[1:].strip()
            line = posixpath.normpath(line)
            if len(line) > 1 and line.startswith("/"):
                line = line.lstrip("/")
            if line == ".":
                continue
            try:
                patterns.append((negate, _pattern_regex(line)))
            except re.error as e:
                raise InvalidSpecError(
                    IGNORE_FILE, raw, f"is not a valid pattern ({e})", "fix or remove the line"
                ) from None
        return cls(patterns)

    @property
    def has_negations(self) -> bool:
        """True if a ``!`` pattern may re-include paths inside an excluded directory."""
        return any(negate for negate, _ in self.patterns)

    def excludes(self, path: str) -> bool:
        """True if ``path`` (relative, ``/``-separated) is left out of the context."""
        parts = path.split("/")
        parents = ["/".join(parts[: i + 1]) for i in range(len(parts) - 1)]
        excluded = False
        for negate, regex in self.patterns:
            if negate != excluded:
                continue  # cannot change the outcome
            if regex.match(path) or any(regex.match(p) for p in parents):
                excluded = not negate
        return excluded


# ---------------------------------------------------------------------------------------------
# The build context
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    """One path of the build context."""

    arcname: str
    kind: str  # "file", "dir" or "symlink"
    mode: int
    size: int = 0
    source: str = ""  # a local path or an fsspec URL (files)
    link: str = ""  # symlink target


def _is_url(path: str) -> bool:
    return "://" in path


def _local_entries(root: str, target: str) -> Iterator[_Entry]:
    """Entries of a local project, minus what its ``.dockerignore`` excludes."""
    if os.path.isfile(root):
        st = os.stat(root)
        name = target or os.path.basename(root)
        yield _Entry(name, "file", stat.S_IMODE(st.st_mode), st.st_size, root)
        return
    ignore_path = os.path.join(root, IGNORE_FILE)
    rules = DockerIgnore()
    if os.path.isfile(ignore_path):
        with open(ignore_path, encoding="utf-8") as f:
            rules = DockerIgnore.parse(f.read())
    prefix = f"{target.strip('/')}/" if target.strip("/") else ""
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        kept_dirs = []
        for name in sorted(dirnames):
            rel = rel_dir + name
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                filenames.append(name)  # a symlink to a directory is stored as a symlink
                continue
            excluded = rules.excludes(rel)
            if excluded and not rules.has_negations:
                continue  # nothing below can come back
            kept_dirs.append(name)
            if not excluded:
                st = os.lstat(full)
                yield _Entry(prefix + rel, "dir", stat.S_IMODE(st.st_mode))
        dirnames[:] = kept_dirs
        for name in sorted(filenames):
            rel = rel_dir + name
            if rules.excludes(rel):
                continue
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                yield _Entry(prefix + rel, "symlink", 0o777, link=os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                yield _Entry(prefix + rel, "file", stat.S_IMODE(st.st_mode), st.st_size, full)
            # sockets, fifos and devices cannot go into an image


def _url_entries(url: str, target: str) -> Iterator[_Entry]:
    """Entries of a project on an fsspec filesystem (regular files only)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    ignore = f"{root.rstrip('/')}/{IGNORE_FILE}"
    rules = DockerIgnore()
    if fs.isfile(ignore):
        with fs.open(ignore, "rb") as f:
            rules = DockerIgnore.parse(f.read().decode("utf-8"))
    prefix = f"{target.strip('/')}/" if target.strip("/") else ""
    found: dict[str, Any] = fs.find(root, detail=True)
    for path in sorted(found):
        info = found[path]
        rel = path[len(root.rstrip("/")) :].lstrip("/")
        if info.get("type") != "file" or not rel or rules.excludes(rel):
            continue
        mode = stat.S_IMODE(int(info["mode"])) if "mode" in info else 0o644
        source = path if "://" in path else f"{protocol}://{path}"
        yield _Entry(prefix + rel, "file", mode, int(info.get("size") or 0), source)


def _open_source(source: str) -> IO[bytes]:
    if _is_url(source):
        import fsspec

        return fsspec.open(source, "rb").open()  # type: ignore[no-any-return]
    return open(source, "rb")


def _collect(workspace: Workspace) -> list[_Entry]:
    entries: dict[str, _Entry] = {}
    for src, target in workspace.projects.items():
        if _is_url(src):
            found = list(_url_entries(src, target))
        else:
            local = os.path.abspath(os.path.expanduser(src))
            if not os.path.exists(local):
                raise InvalidSpecError(
                    "Workspace.projects",
                    src,
                    "the local path does not exist",
                    "point the workspace at an existing file or directory",
                )
            found = list(_local_entries(local, target))
        for entry in found:
            entries[entry.arcname] = entry  # a later project overlays an earlier one
    return [entries[name] for name in sorted(entries)]


def _content_hash(base_image: str, dockerfile: bytes, entries: list[_Entry]) -> str:
    digest = hashlib.sha256(_HASH_VERSION)
    digest.update(f"base {base_image}\n".encode())
    digest.update(b"dockerfile " + hashlib.sha256(dockerfile).hexdigest().encode() + b"\n")
    for entry in entries:
        if entry.kind == "file":
            content = hashlib.sha256()
            with _open_source(entry.source) as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    content.update(chunk)
            what = content.hexdigest()
        else:
            what = entry.link
        digest.update(f"{entry.kind} {entry.mode:o} {entry.arcname!r} {what}\n".encode())
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------------------------


@dataclass
class WorkspaceImageBuild:
    """The plan for one workspace image: made at dryrun, carried out at schedule time."""

    #: the role's original image (the ``FROM``)
    base_image: str
    #: the image the role runs: ``{repository}:{content hash prefix}``
    image: str
    content_hash: str
    #: ``{local path or URL: target directory}``, as given
    projects: dict[str, str]
    #: ``"default"`` or the path of the workspace's own Dockerfile.anylaunch
    dockerfile: str
    num_files: int
    size_bytes: int
    #: push ``image`` to its repository after the build
    push: bool

    def summary(self) -> str:
        """What the plan does, in one or two lines (for dryrun output).

        >>> print(WorkspaceImageBuild("busybox:latest", "anylaunch-workspace:ab12", "ab12",
        ...       {"/src/proj": ""}, "default", 3, 2048, False).summary())
        build anylaunch-workspace:ab12 FROM busybox:latest with workspace /src/proj (3 files, 2048 bytes, default Dockerfile), unless the engine already has it
        """
        projects = ",".join(f"{k}:{v}" if v else k for k, v in self.projects.items())
        dockerfile = "default Dockerfile" if self.dockerfile == "default" else self.dockerfile
        text = (
            f"build {self.image} FROM {self.base_image} with workspace {projects} "
            f"({self.num_files} files, {self.size_bytes} bytes, {dockerfile}), "
            "unless the engine already has it"
        )
        if self.push:
            text += f"\nthen push {self.image}"
        return text


def check_image_repo(image_repo: str | None) -> str | None:
    """Returns ``image_repo`` (None when unset) after checking it names a repository.

    >>> check_image_repo("127.0.0.1:5000/team/app")
    '127.0.0.1:5000/team/app'
    >>> check_image_repo("app:latest")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidRunConfigException: image_repo='app:latest' is invalid: is not an image repository (lowercase [host[:port]/]path, no tag). Fix: pass e.g. registry.example.com/team/app or 127.0.0.1:5000/app
    """
    if image_repo is None or image_repo == "":
        return None
    if not isinstance(image_repo, str) or not _REPOSITORY.match(image_repo):
        raise InvalidRunConfigException(
            "image_repo",
            image_repo,
            "is not an image repository (lowercase [host[:port]/]path, no tag)",
            "pass e.g. registry.example.com/team/app or 127.0.0.1:5000/app",
        )
    return image_repo


def plan_workspace_image(
    base_image: str, workspace: Workspace, image_repo: str | None = None
) -> WorkspaceImageBuild:
    """Plans the workspace image for a role whose image is ``base_image`` (reads and hashes
    the workspace; contacts no engine).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "main.py").write_text("print('hi')")
    >>> plan = plan_workspace_image("busybox:latest", Workspace({str(d): ""}))
    >>> plan.image == f"anylaunch-workspace:{plan.content_hash[:24]}", plan.num_files
    (True, 1)
    >>> plan_workspace_image("busybox:latest", Workspace({str(d): ""})).image == plan.image
    True
    """
    if not isinstance(base_image, str) or not base_image.strip():
        raise InvalidSpecError(
            "Role.image",
            base_image,
            "a Docker workspace needs the role's image to build FROM",
            "set the role's image, e.g. image='python:3.11'",
        )
    if not isinstance(workspace, Workspace):
        raise InvalidSpecError(
            "workspace", workspace, "must be a Workspace", "pass Workspace.from_str(path)"
        )
    return _plan(base_image, workspace, check_image_repo(image_repo))[0]


def _plan(
    base_image: str, workspace: Workspace, repo: str | None
) -> tuple[WorkspaceImageBuild, list[_Entry]]:
    entries = _collect(workspace)
    override = next(
        (e for e in entries if e.arcname == WORKSPACE_DOCKERFILE and e.kind == "file"), None
    )
    if override is not None:
        with _open_source(override.source) as f:
            dockerfile = f.read()
        described = override.source
    else:
        dockerfile = DEFAULT_DOCKERFILE.encode()
        described = "default"
    content_hash = _content_hash(base_image, dockerfile, entries)
    files = [e for e in entries if e.kind != "dir"]
    plan = WorkspaceImageBuild(
        base_image=base_image,
        image=f"{repo or LOCAL_REPOSITORY}:{content_hash[:_TAG_LENGTH]}",
        content_hash=content_hash,
        projects=dict(workspace.projects),
        dockerfile=described,
        num_files=len(files),
        size_bytes=sum(e.size for e in files),
        push=repo is not None,
    )
    return plan, entries


def _write_context(plan: WorkspaceImageBuild, entries: list[_Entry], out: IO[bytes]) -> None:
    """Writes the build context tarball: the workspace (under ``workspace/`` with the default
    Dockerfile, at the root with the workspace's own)."""
    prefix = "" if plan.dockerfile != "default" else "workspace/"
    with tarfile.open(fileobj=out, mode="w") as tar:
        if prefix:
            data = DEFAULT_DOCKERFILE.encode()
            info = tarfile.TarInfo(WORKSPACE_DOCKERFILE)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
            info = tarfile.TarInfo("workspace")
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for entry in entries:
            info = tarfile.TarInfo(prefix + entry.arcname)
            info.mode = entry.mode
            if entry.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif entry.kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, entry.link
                tar.addfile(info)
            else:
                info.size = entry.size
                with _open_source(entry.source) as f:
                    tar.addfile(info, f)
    out.seek(0)


# ---------------------------------------------------------------------------------------------
# The mixin
# ---------------------------------------------------------------------------------------------


class DockerWorkspaceMixin(WorkspaceMixin[dict[str, WorkspaceImageBuild]]):
    """Builds the role's image with the workspace copied in, named by the content's hash.

    At dryrun (:meth:`build_workspace_and_update_role`) only a plan is made and the role's
    image is pointed at the planned tag; a scheduler puts :meth:`workspace_builds` into its
    request and calls :meth:`build_workspace_images` when it schedules. A workspace that did
    not change keeps its tag, so it is not rebuilt (nor re-pushed by content: the registry
    already has its layers). Needs a Docker engine at schedule time (``DOCKER_HOST``);
    schedulers that have an engine client override :meth:`_workspace_docker_client`.
    """

    def workspace_opts(self) -> runopts:
        """The ``image_repo`` option."""
        return DockerWorkspaceOpts.as_runopts()

    def _workspace_plans(self) -> dict[str, WorkspaceImageBuild]:
        plans: dict[str, WorkspaceImageBuild] | None = self.__dict__.get(_PLANS_ATTR)
        if plans is None:
            plans = {}
            self.__dict__[_PLANS_ATTR] = plans
        return plans

    def build_workspace_and_update_role(
        self, role: Role, workspace: Workspace, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Plans the workspace image and points ``role.image`` at it (nothing is built yet).

        Raises:
            InvalidSpecError: the role has no image, or a workspace path does not exist.
            InvalidRunConfigException: ``image_repo`` is not a repository name.
        """
        image_repo = cfg.get("image_repo") if isinstance(cfg, Mapping) else None
        if image_repo is not None and not isinstance(image_repo, str):
            raise InvalidRunConfigException(
                "image_repo", image_repo, "must be a str", "pass e.g. registry.example.com/app"
            )
        plan = plan_workspace_image(role.image, workspace, image_repo)
        self._workspace_plans()[plan.image] = plan
        role.image = plan.image

    def workspace_builds(self, app: AppDef) -> list[WorkspaceImageBuild]:
        """The planned builds whose image one of ``app``'s roles runs (for the request)."""
        plans = self._workspace_plans()
        builds: list[WorkspaceImageBuild] = []
        for role in app.roles:
            plan = plans.get(role.image)
            if plan is not None and plan not in builds:
                builds.append(plan)
        return builds

    def _workspace_docker_client(self) -> Any:
        """The Docker SDK client used to build and push (default: from ``DOCKER_HOST``)."""
        docker = require_sdk("docker", extra="docker", scheduler="docker workspace")
        return docker.from_env()

    def build_workspace_images(self, builds: list[WorkspaceImageBuild]) -> list[str]:
        """Carries out the plans: builds each image the engine lacks, pushes when asked.

        Returns what was done, one line per step (e.g. ``built X``, ``reused X``,
        ``pushed X``).

        Raises:
            WorkspaceBuildError: the base image is missing, the workspace changed since the
                dryrun, or the engine failed to build or push (its output is quoted).
        """
        done: list[str] = []
        if not builds:
            return done
        client = self._workspace_docker_client()
        for plan in builds:
            done.append(_build_one(client, plan))
            if plan.push:
                _push_one(client, plan)
                done.append(f"pushed {plan.image}")
        return done


def _engine_error(e: Exception) -> str:
    return str(getattr(e, "explanation", None) or e)


def _image_id(client: Any, image: str) -> str | None:
    docker = require_sdk("docker", extra="docker", scheduler="docker workspace")
    try:
        return str(client.api.inspect_image(image)["Id"])
    except docker.errors.ImageNotFound:
        return None


def _build_one(client: Any, plan: WorkspaceImageBuild) -> str:
    docker = require_sdk("docker", extra="docker", scheduler="docker workspace")
    base_id = _image_id(client, plan.base_image)
    if base_id is None:
        raise WorkspaceBuildError(
            f"cannot build workspace image {plan.image}: its base image {plan.base_image!r} is "
            "not in the Docker engine. Fix: build, load or pull that image first"
        )
    try:
        existing = client.api.inspect_image(plan.image)
    except docker.errors.ImageNotFound:
        existing = None
    labels = ((existing or {}).get("Config") or {}).get("Labels") or {}
    if existing is not None and labels.get(LABEL_BASE_IMAGE_ID) == base_id:
        log.info("workspace image %s is up to date; not rebuilding", plan.image)
        return f"reused {plan.image}"

    workspace = Workspace(dict(plan.projects))
    again, entries = _plan(plan.base_image, workspace, None)
    if again.content_hash != plan.content_hash:
        raise WorkspaceBuildError(
            f"the workspace {workspace} changed between the dryrun and the build (its content "
            f"hash is now {again.content_hash[:_TAG_LENGTH]}, the plan says "
            f"{plan.content_hash[:_TAG_LENGTH]}). Fix: dry-run the app again"
        )
    import tempfile

    log.info("building workspace image %s FROM %s", plan.image, plan.base_image)
    output: list[str] = []
    with tempfile.SpooledTemporaryFile(max_size=64 << 20) as context:
        _write_context(plan, entries, context)
        try:
            events = client.api.build(
                fileobj=context,
                custom_context=True,
                dockerfile=WORKSPACE_DOCKERFILE,
                tag=plan.image,
                buildargs={"IMAGE": plan.base_image, "WORKSPACE": str(workspace)},
                labels={LABEL_CONTENT_HASH: plan.content_hash, LABEL_BASE_IMAGE_ID: base_id},
                pull=False,
                rm=True,
                forcerm=True,
                decode=True,
            )
            for event in events:
                if "stream" in event:
                    line = str(event["stream"]).rstrip("\n")
                    if line.strip():
                        output.append(line)
                        log.info("build %s: %s", plan.image, line)
                if "error" in event:
                    raise WorkspaceBuildError(
                        f"building workspace image {plan.image} failed: {event['error']}. "
                        f"Build output:\n" + "\n".join(output[-20:])
                    )
        except docker.errors.APIError as e:
            raise WorkspaceBuildError(
                f"building workspace image {plan.image} failed: {_engine_error(e)}. "
                "Fix: check the Dockerfile and that the engine can run builds"
            ) from e
    old_id = (existing or {}).get("Id")
    if old_id and old_id != _image_id(client, plan.image):
        # the old image (same tag, older base) is now untagged: drop it unless something uses it
        with contextlib.suppress(docker.errors.APIError):
            client.api.remove_image(old_id)
    return f"built {plan.image}"


def _push_one(client: Any, plan: WorkspaceImageBuild) -> None:
    docker = require_sdk("docker", extra="docker", scheduler="docker workspace")
    repository, _, tag = plan.image.rpartition(":")
    log.info("pushing workspace image %s", plan.image)
    try:
        for event in client.api.push(repository, tag=tag, stream=True, decode=True):
            if "error" in event:
                raise WorkspaceBuildError(
                    f"pushing workspace image {plan.image} failed: {event['error']}. Fix: "
                    f"check that the registry of {repository} is reachable and that the engine "
                    "is logged in to it (docker login)"
                )
    except docker.errors.APIError as e:
        raise WorkspaceBuildError(
            f"pushing workspace image {plan.image} failed: {_engine_error(e)}. Fix: check the "
            f"registry of {repository} and the engine's login to it"
        ) from e
