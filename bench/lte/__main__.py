from bench.lte import main

main()
