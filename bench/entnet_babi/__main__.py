from bench.entnet_babi import main

main()
