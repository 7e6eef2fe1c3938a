from bench.lm import main

main()
