"""Pure renderers: each is a function of (spec, plan) with no AWS call, clock or randomness."""
