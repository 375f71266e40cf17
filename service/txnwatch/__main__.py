from txnwatch.cli.main import main

main()
