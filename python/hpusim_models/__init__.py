"""hpusim's reference models (MLP, CNN, tiny transformer LM), their data and a training loop,
shared by the main job, the tests and the benchmarks."""
