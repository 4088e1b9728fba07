"""`habana_frameworks.torch.internal`: the bridge's runtime configuration (bridge_config)."""
