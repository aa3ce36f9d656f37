module github.com/zonal-ingress/zonal

go 1.25.0

require github.com/alecthomas/kong v1.17.0
