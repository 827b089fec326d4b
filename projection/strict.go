package projection

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// shape describes each position of the fixture schema, so that checkShape
// can check keys exactly and types with a useful path. encoding/json matches
// keys case-insensitively, keeps the last of repeated keys and names Go
// types in its errors; none of that suits a file that decides who may run
// whose jobs.
type shape struct {
	kind   kind
	fields map[string]*shape // for objects: the allowed keys
	elem   *shape            // for arrays: the elements
}

type kind int

const (
	kindString kind = iota
	kindBool
	kindNumber
	kindObject
	kindArray
)

var (
	str           = &shape{kind: kindString}
	boolean       = &shape{kind: kindBool}
	number        = &shape{kind: kindNumber}
	identityShape = object(map[string]*shape{
		"identity":      str,
		"encryption":    str,
		"encryptionSig": str,
	})
	fixtureShape = object(map[string]*shape{
		"sites": array(object(map[string]*shape{
			"siteId": str,
			"site":   identityShape,
			"succeeds": array(object(map[string]*shape{
				"identity":  identityShape,
				"signature": str,
			})),
			"retiringUntil": number,
		})),
		"consents": array(object(map[string]*shape{
			"owner":  str,
			"siteId": str,
			"paused": boolean,
			"mappings": array(object(map[string]*shape{
				"purpose":      str,
				"kind":         str,
				"service":      str,
				"serviceOwner": str,
			})),
		})),
		"devices": array(object(map[string]*shape{
			"owner":    str,
			"runnerId": str,
			"device":   identityShape,
			"revoked":  boolean,
			"grantKey": str,
		})),
		"rosters": array(object(map[string]*shape{
			"id":      str,
			"owner":   str,
			"members": array(str),
		})),
		"revoked": array(object(map[string]*shape{
			"owner":  str,
			"siteId": str,
		})),
	})
)

func object(fields map[string]*shape) *shape { return &shape{kind: kindObject, fields: fields} }
func array(elem *shape) *shape               { return &shape{kind: kindArray, elem: elem} }

// checkShape walks the document token by token against the schema and
// refuses, with the path of the offending value: anything but a single
// top-level object, repeated keys, keys the schema does not know at that
// position (compared exactly), null values (the schema allows none) and
// values of the wrong type. What it lets through decodes cleanly.
func checkShape(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := walker{dec: dec, data: data}
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return errors.New("empty document")
	}
	if err != nil {
		return w.syntax(err)
	}
	if tok != json.Delim('{') {
		return errors.New("the document must be a JSON object")
	}
	if err := w.object(fixtureShape, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the top-level object")
	}
	return nil
}

type walker struct {
	dec  *json.Decoder
	data []byte
}

// token reads the next token, locating syntax errors for the reader.
func (w walker) token() (json.Token, error) {
	tok, err := w.dec.Token()
	if err != nil {
		return nil, w.syntax(err)
	}
	return tok, nil
}

// value checks the value whose first token is tok against s.
func (w walker) value(tok json.Token, s *shape, at string) error {
	if tok == nil {
		return fmt.Errorf("%s: null is not allowed", where(at))
	}
	switch s.kind {
	case kindObject:
		if tok != json.Delim('{') {
			return fmt.Errorf("%s: must be an object", where(at))
		}
		return w.object(s, at)
	case kindArray:
		if tok != json.Delim('[') {
			return fmt.Errorf("%s: must be an array", where(at))
		}
		return w.array(s, at)
	case kindString:
		if _, ok := tok.(string); !ok {
			return fmt.Errorf("%s: must be a string", where(at))
		}
	case kindBool:
		if _, ok := tok.(bool); !ok {
			return fmt.Errorf("%s: must be a boolean", where(at))
		}
	case kindNumber:
		if _, ok := tok.(json.Number); !ok {
			return fmt.Errorf("%s: must be a number", where(at))
		}
	}
	return nil
}

// object checks the members of an object whose '{' was just read.
func (w walker) object(s *shape, at string) error {
	seen := make(map[string]bool, len(s.fields))
	for w.dec.More() {
		tok, err := w.token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok { // the decoder yields only string keys; this is belt and braces
			return fmt.Errorf("%s: expected an object key", where(at))
		}
		if seen[key] {
			return fmt.Errorf("%s: duplicate key %q", where(at), key)
		}
		seen[key] = true
		child := s.fields[key]
		if child == nil {
			return fmt.Errorf("%s: unknown key %q", where(at), key)
		}
		path := key
		if at != "" {
			path = at + "." + key
		}
		if tok, err = w.token(); err != nil {
			return err
		}
		if err := w.value(tok, child, path); err != nil {
			return err
		}
	}
	_, err := w.token() // the closing '}'
	return err
}

// array checks the elements of an array whose '[' was just read.
func (w walker) array(s *shape, at string) error {
	for i := 0; w.dec.More(); i++ {
		tok, err := w.token()
		if err != nil {
			return err
		}
		if err := w.value(tok, s.elem, at+"["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
	}
	_, err := w.token() // the closing ']'
	return err
}

// syntax adds a line and column to a JSON syntax error, for whoever has to
// fix the file.
func (w walker) syntax(err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("invalid JSON: unexpected end of document: %w", err)
		}
		return fmt.Errorf("invalid JSON: %w", err)
	}
	off := min(int(se.Offset), len(w.data))
	line := 1 + bytes.Count(w.data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(w.data[:off], '\n')
	return fmt.Errorf("invalid JSON at line %d, column %d: %w", line, col, err)
}

// where names a position for an error message.
func where(at string) string {
	if at == "" {
		return "top level"
	}
	return at
}
