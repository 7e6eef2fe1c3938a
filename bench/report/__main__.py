from bench.report.pages import main

main()
