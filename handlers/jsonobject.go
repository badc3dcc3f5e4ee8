package handlers

import (
	"bytes"
	"encoding/json"
	"slices"
)

// membersOf splits data, one valid JSON value (json.Valid), into the members of the object it
// is, in order, as parseObject's decoder would, without decoding them: ok is false when data is
// not an object, err when a member is given twice. Every request body that is an object goes
// this way; the decoder reads only what is not valid JSON, for its message.
func membersOf(data []byte) (members []member, ok bool, err error) {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return nil, false, nil
	}
	var seen map[string]bool
	for i = skipSpace(data, i+1); data[i] != '}'; i = skipSpace(data, i+1) {
		end := valueEnd(data, i) // the name, a string
		name, err := memberName(data[i:end])
		if err != nil {
			return nil, true, err
		}
		i = skipSpace(data, skipSpace(data, end)+1) // past the colon
		end = valueEnd(data, i)
		if seen == nil && len(members) == 16 { // past a few, a search of members would cost their square
			seen = map[string]bool{}
			for _, m := range members {
				seen[m.name] = true
			}
		}
		if seen[name] || seen == nil && slices.ContainsFunc(members, func(m member) bool { return m.name == name }) {
			return nil, true, badRequest("member %q is given more than once", name)
		}
		if seen != nil {
			seen[name] = true
		}
		members = append(members, member{name, json.RawMessage(data[i:end])})
		if i = skipSpace(data, end); data[i] == '}' {
			break
		}
	}
	return members, true, nil
}

// memberName is the string of quoted, a JSON string.
func memberName(quoted []byte) (string, error) {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1 : len(quoted)-1]), nil
	}
	var name string
	err := json.Unmarshal(quoted, &name)
	return name, err
}

// skipSpace is the offset of the first byte of data from i on that is not JSON white space.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// valueEnd is the offset just past the JSON value of valid data that begins at i.
func valueEnd(data []byte, i int) int {
	depth := 0
	for ; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of a number or a literal
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i // the end of a number or a literal
			}
		}
	}
	return i
}
