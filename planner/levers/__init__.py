"""The levers: graph rewrites that reshape the problem so the program needs fewer bytes or copies.

Each lever is one folder (`cat`, `state_in_place`, `slice_noop`) implementing the protocol in
`lever`, registered by one line in `registry` (which derives `PlannerPass`'s lever keywords); levers share graph facts (`memplan.planner.graph.facts`) and one refusal vocabulary
(`refusals`), and never import each other.
"""
