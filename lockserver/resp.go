package lockserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The recorder's Redis connection speaks RESP3 by hand: it subscribes to
// the lock's keyspace notifications and then enters MONITOR on the same
// connection, so that the server's reports of what each command did (a
// "set", an "expired") arrive in one stream with the commands, in the
// order the server executed them. go-redis keeps a subscription and a
// monitor on connections of their own, whose streams no reader can
// interleave in the server's order, so this small reader and writer of the
// protocol are written here (redis.io/docs/reference/protocol-spec).

// A respValue is one RESP3 value: kind is its type byte ('+', '-', ':',
// '$', '*', '>', '%', '~', '_', ',', '#', '(', '=', '|'), str its text
// (a simple or bulk string, an error, a number as written), elems a
// collection's elements (a map's keys and values alternating).
type respValue struct {
	kind  byte
	str   string
	null  bool
	elems []respValue
}

// errProtocol marks what the server sent that is not RESP.
var errProtocol = errors.New("not RESP3")

// maxBulk bounds one bulk string, and maxElems one collection, that the
// reader takes: MONITOR quotes whole scripts, but nothing the lock's
// commands send comes near these.
const (
	maxBulk  = 64 << 20
	maxElems = 1 << 20
	maxDepth = 32
)

// readValue reads the next value from r.
func readValue(r *bufio.Reader) (respValue, error) { return readDepth(r, 0) }

func readDepth(r *bufio.Reader, depth int) (respValue, error) {
	if depth > maxDepth {
		return respValue{}, fmt.Errorf("%w: nested deeper than %d", errProtocol, maxDepth)
	}
	line, err := readLine(r)
	if err != nil {
		return respValue{}, err
	}
	if len(line) == 0 {
		return respValue{}, fmt.Errorf("%w: an empty line", errProtocol)
	}
	v := respValue{kind: line[0], str: string(line[1:])}
	switch v.kind {
	case '+', '-', ':', ',', '#', '(':
		return v, nil
	case '_':
		v.null = true
		return v, nil
	case '$', '=', '!':
		return readBulk(r, v)
	case '*', '>', '~', '%', '|':
		return readElems(r, v, depth)
	}
	return respValue{}, fmt.Errorf("%w: type byte %q", errProtocol, v.kind)
}

// readBulk reads the body of a bulk string whose header is v.
func readBulk(r *bufio.Reader, v respValue) (respValue, error) {
	n, err := strconv.Atoi(v.str)
	switch {
	case err != nil || n > maxBulk:
		return respValue{}, fmt.Errorf("%w: a bulk string of length %q", errProtocol, v.str)
	case n < 0:
		v.null, v.str = true, ""
		return v, nil
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(r, b); err != nil {
		return respValue{}, err
	}
	v.str = string(b[:n])
	return v, nil
}

// readElems reads the elements of a collection whose header is v; a
// map's and an attribute's count pairs.
func readElems(r *bufio.Reader, v respValue, depth int) (respValue, error) {
	n, err := strconv.Atoi(v.str)
	if err != nil || n > maxElems {
		return respValue{}, fmt.Errorf("%w: a collection of %q elements", errProtocol, v.str)
	}
	if n < 0 {
		v.null = true
		return v, nil
	}
	if v.kind == '%' || v.kind == '|' {
		n *= 2
	}
	v.elems = make([]respValue, 0, min(n, 64))
	for range n {
		e, err := readDepth(r, depth+1)
		if err != nil {
			return respValue{}, err
		}
		v.elems = append(v.elems, e)
	}
	if v.kind == '|' { // an attribute: about the value after it, which is the answer
		return readDepth(r, depth)
	}
	return v, nil
}

// readLine reads one CRLF-ended line, without the CRLF.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("%w: a line longer than %d bytes", errProtocol, r.Size())
	}
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: a line not ended by CRLF", errProtocol)
	}
	return line[:len(line)-2], nil
}

// appendCommand appends args to b as a RESP command.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// err returns the server's error when v is one.
func (v respValue) err() error {
	if v.kind == '-' || v.kind == '!' {
		return serverError(v.str)
	}
	return nil
}

// A serverError is an error the server answered.
type serverError string

func (e serverError) Error() string { return string(e) }
