"""habana_frameworks.torch.hpex: Habana extensions. As in the bridge, importing the package
imports no subpackage; import each explicitly (`from habana_frameworks.torch.hpex import hmp`)."""
