"""habana_frameworks.torch.hpex.experimental: the Intel Gaudi Transformer Engine (fp8)."""
