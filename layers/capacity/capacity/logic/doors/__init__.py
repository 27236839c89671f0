"""The doors' server side: the REST API (:mod:`~capacity.logic.doors.api`), Slack
(:mod:`~capacity.logic.doors.slack_door`), schedules, serve_until and extension requests. The doors import
the steps, continuity and governance; nothing there imports a door (an import-linter contract)."""
