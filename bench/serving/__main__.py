from bench.serving import main

main()
