from bench.memo_babi import main

main()
