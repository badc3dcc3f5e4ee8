// Package openapi holds the OpenAPI 3.1 description of the REST API (openapi.yaml), which the
// module serves at the path its config names and the tests hold every REST answer against.
package openapi

import _ "embed"

// Document is openapi.yaml, as served.
//
//go:embed openapi.yaml
var Document []byte

// MediaType is what Document is served as (RFC 9512).
const MediaType = "application/yaml"
