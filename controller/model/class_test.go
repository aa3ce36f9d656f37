package model

import "testing"

// servedShop is the model when the shop Ingress below is ours.
const servedShop = `
	server shop.example.com
	   / -> default-web-80 (default/shop Prefix)
	backend default-web-80 default/web:80
	  10.0.1.1:8080 zone=zone-a node=node-a ready
`

func TestClass(t *testing.T) {
	watchWithoutClass := testOptions
	watchWithoutClass.WatchIngressWithoutClass = true
	ingressNginxName := testOptions
	ingressNginxName.IngressClass = "nginx"

	runCases(t, map[string]buildCase{
		"ingressClassName is our class": {
			objs: shopIngress(`ingressClassName: zonal`, ``),
			want: servedShop,
		},
		"ingressClassName is another class with our controller": {
			objs: `
				apiVersion: networking.k8s.io/v1
				kind: IngressClass
				metadata:
				  name: zonal-internal
				spec:
				  controller: zonal.dev/ingress-controller
				---` + shopIngress(`ingressClassName: zonal-internal`, ``),
			want: servedShop,
		},
		"ingressClassName is another controller's class: ignored silently": {
			objs: shopIngress(`ingressClassName: other`, ``),
			want: ``,
		},
		"ingressClassName names no IngressClass at all: ignored silently": {
			objs: shopIngress(`ingressClassName: nobody`, ``),
			want: ``,
		},
		"ingressClassName is --ingress-class but the IngressClass is missing: a problem": {
			opts: &ingressNginxName,
			objs: shopIngress(`ingressClassName: nginx`, ``),
			want: `
				problem Ingress default/shop spec.ingressClassName
			`,
			says: []string{`IngressClass "nginx" does not exist`, `spec.controller "zonal.dev/ingress-controller"`},
		},
		"class annotation is ours": {
			objs: shopIngress(``, `kubernetes.io/ingress.class: zonal`),
			want: servedShop,
		},
		"class annotation is another's": {
			objs: shopIngress(``, `kubernetes.io/ingress.class: other`),
			want: ``,
		},
		"ingressClassName wins over the annotation": {
			objs: shopIngress(`ingressClassName: other`, `kubernetes.io/ingress.class: zonal`),
			want: ``,
		},
		"no class, our IngressClass is the default": {
			objs: `
				apiVersion: networking.k8s.io/v1
				kind: IngressClass
				metadata:
				  name: zonal-default
				  annotations:
				    ingressclass.kubernetes.io/is-default-class: "true"
				spec:
				  controller: zonal.dev/ingress-controller
				---` + shopIngress(``, ``),
			want: servedShop,
		},
		"no class, another controller's IngressClass is the default": {
			objs: `
				apiVersion: networking.k8s.io/v1
				kind: IngressClass
				metadata:
				  name: other-default
				  annotations:
				    ingressclass.kubernetes.io/is-default-class: "true"
				spec:
				  controller: example.com/other-controller
				---` + shopIngress(``, ``),
			want: ``,
		},
		"no class, --watch-ingress-without-class": {
			opts: &watchWithoutClass,
			objs: shopIngress(``, ``),
			want: servedShop,
		},
		"no class, no default: ignored silently": {
			objs: shopIngress(``, ``),
			want: ``,
		},
	})
}

// shopIngress is a one-rule Ingress with the given spec line (class) and
// metadata annotation line, either possibly empty.
func shopIngress(specLine, annotation string) string {
	annotations := ""
	if annotation != "" {
		annotations = "\n  annotations:\n    " + annotation
	}
	return `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop` + annotations + `
spec:
  ` + specLine + `
  rules:
  - host: shop.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              number: 80
`
}
