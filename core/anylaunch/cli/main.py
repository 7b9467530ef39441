def main() -> None:  # replaced by the runner issue
    raise SystemExit("anylaunch CLI not built yet")
