package model

import (
	networking_v1 "k8s.io/api/networking/v1"
)

// classifier decides which Ingresses this controller serves.
type classifier struct {
	classes map[string]*networking_v1.IngressClass
	o       Options
	// defaultClass is set when an IngressClass of ours is marked as the
	// cluster default.
	defaultClass bool
}

func newClassifier(classes map[string]*networking_v1.IngressClass, o Options) classifier {
	c := classifier{classes: classes, o: o}
	for _, ic := range classes {
		if ic.Spec.Controller == o.ControllerClass &&
			ic.Annotations[networking_v1.AnnotationIsDefaultIngressClass] == "true" {
			c.defaultClass = true
			break
		}
	}
	return c
}

// ours reports whether this controller serves ing, in the order
// ingress-nginx documents:
//
//   - spec.ingressClassName names an IngressClass whose spec.controller is
//     ours (--ingress-class is such a class when it exists);
//   - else the deprecated kubernetes.io/ingress.class annotation equals
//     --ingress-class;
//   - else, with no class at all, an IngressClass of ours is the cluster
//     default, or --watch-ingress-without-class is set.
//
// missingClass is set when spec.ingressClassName is --ingress-class but no
// such IngressClass exists: the user meant us, and deserves to hear why the
// Ingress is not served. Every other Ingress that is not ours belongs to
// another controller and is none of our business.
func (c classifier) ours(ing *networking_v1.Ingress) (ours, missingClass bool) {
	if name := ing.Spec.IngressClassName; name != nil && *name != "" {
		if ic := c.classes[*name]; ic != nil {
			return ic.Spec.Controller == c.o.ControllerClass, false
		}
		return false, *name == c.o.IngressClass
	}
	if class := ing.Annotations[AnnotationIngressClass]; class != "" {
		return class == c.o.IngressClass, false
	}
	return c.defaultClass || c.o.WatchIngressWithoutClass, false
}
