from jaxcache.cli import main

main()
