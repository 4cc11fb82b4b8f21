pytest_plugins = ["tests.fakes.rollout_fixtures"]
