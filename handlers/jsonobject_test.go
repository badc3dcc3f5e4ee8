package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// decodedMembers is what json.Decoder reads of data as parseObject read every body before
// membersOf: the members of the object, in order; ok is false when data is not one JSON object,
// twice when a member is given twice.
func decodedMembers(data []byte) (members []member, ok, twice bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false, false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false, false
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, false, false
		}
		name := tok.(string)
		if seen[name] {
			return nil, true, true
		}
		seen[name] = true
		members = append(members, member{name, value})
	}
	if _, err := dec.Token(); err != nil {
		return nil, false, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false, false
	}
	return members, true, false
}

var objectSeeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":1,"b":[1,{"c":"}"}],"d":null}`, "{\n\t\"query\" : \"{ post(id: \\\"1\\\") { id } }\" ,\r\n\"variables\":{\"id\":\"x\"}}",
	`{"a":"\"}","b":-1.5e3,"c":true,"d":false}`, `{"\u0061":1,"a":2}`, `{"a":{},"b":[]}`, `{"q":"\\"}`,
	`[1]`, `"x"`, `1`, `null`, `{"a":1}{"b":2}`, `{"a":1,}`, `{"a"}`,
	`{` + strings.Repeat(`"k":1,`, 20) + `"z":2}`,
}

// TestMembersOfReadsAsTheDecoderDid holds membersOf to json.Decoder on every valid body.
func TestMembersOfReadsAsTheDecoderDid(t *testing.T) {
	for _, s := range objectSeeds {
		checkMembersOf(t, []byte(s))
	}
}

func FuzzMembersOf(f *testing.F) {
	for _, s := range objectSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkMembersOf)
}

func checkMembersOf(t *testing.T, data []byte) {
	if checkJSONText("the body", data) != nil || !json.Valid(data) {
		return // parseObject refuses it, or reads it with the decoder
	}
	want, wantOK, wantTwice := decodedMembers(data)
	got, ok, err := membersOf(data)
	if ok != wantOK || (err != nil) != wantTwice || err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("membersOf(%q) = %q, %v, %v; the decoder read %q, %v, twice %v", data, got, ok, err, want, wantOK, wantTwice)
	}
}
