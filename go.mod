module hpusim

go 1.24
