from lmikit.cli import main

main()
