"""The workspace on object storage: remote units, markers, staging (remote.py); one way to run a task
on a node over it (task.py); the task log (tasklog.py)."""
