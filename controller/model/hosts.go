package model

// Host grammar. A host reaches nginx.conf as a server_name, so it is checked
// against a strict grammar rather than escaped: a lowercase RFC 1123 DNS
// name, optionally "*." and such a name (the wildcard stands for exactly one
// label; the renderer makes it so).

const (
	maxHostLen  = 253
	maxLabelLen = 63
)

// hostError says what is wrong with a rule or TLS host, "" if it is valid.
// The empty host is not valid here: a rule without a host never reaches this
// check. The length limit applies to the whole host, wildcard included, as
// the API server's own validation does.
func hostError(h string) string {
	switch {
	case h == "":
		return "is empty"
	case len(h) > maxHostLen:
		return "is longer than 253 characters"
	}
	name := h
	if len(name) >= 2 && name[0] == '*' && name[1] == '.' {
		name = name[2:]
	}
	label := 0 // length of the current label
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			label++
		case c == '-':
			if label == 0 {
				return "has a label that starts with '-'"
			}
			label++
		case c == '.':
			if label == 0 {
				return "has an empty label"
			}
			if name[i-1] == '-' {
				return "has a label that ends with '-'"
			}
			label = 0
			continue
		case c >= 'A' && c <= 'Z':
			return "has uppercase letters (hosts must be lowercase)"
		case c == '*':
			return "has a '*' that is not a leading \"*.\" wildcard label"
		default:
			return "has a character other than a-z, 0-9, '-' and '.'"
		}
		if label > maxLabelLen {
			return "has a label longer than 63 characters"
		}
	}
	if label == 0 {
		return "has an empty label"
	}
	if name[len(name)-1] == '-' {
		return "has a label that ends with '-'"
	}
	return ""
}
