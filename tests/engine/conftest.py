from taskkit import make_task

__all__ = ["make_task"]
