"""The stages `PlannerPass` composes, one job each, in the order a graph goes through them."""
