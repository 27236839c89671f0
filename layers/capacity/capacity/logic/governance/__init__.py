"""Who may do what and what it costs: policy and teams (limits, approvals), the checks of what a request
names, costs and their reconciliation, on-demand spend. No module here imports a door."""
