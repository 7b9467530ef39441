"""A stand-in training program: prints progress and writes a model file.

Launched by the `trained_model` asset of definitions.py (one process per replica).
"""

import os
import sys
import time
from pathlib import Path


def main() -> int:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "model")
    epochs = int(os.environ.get("EPOCHS", "3"))
    rank = os.environ.get("REPLICA", "0")
    for epoch in range(epochs):
        print(f"rank {rank}: epoch {epoch + 1}/{epochs} loss={1.0 / (epoch + 1):.3f}", flush=True)
        time.sleep(0.2)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"weights-{rank}.txt").write_text(f"trained for {epochs} epochs\n")
    print(f"rank {rank}: saved {out_dir / f'weights-{rank}.txt'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
