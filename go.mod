module github.com/zonal-ingress/zonal

go 1.25.0
