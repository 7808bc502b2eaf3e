package compat

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrBadNacosSnapshot wraps every reason a Nacos lock snapshot is refused
// before or while it is decoded.
var ErrBadNacosSnapshot = errors.New("bad Nacos lock snapshot")

// Nacos class and type names a lock snapshot may contain (docs/lock-semantics.md
// §9.4, §9.5).
const (
	classLockKey      = "com.alibaba.nacos.lock.model.LockKey"
	classWaitEntry    = "com.alibaba.nacos.lock.model.WaitEntry"
	classMutex        = "com.alibaba.nacos.lock.core.reentrant.mutex.MutexAtomicLock"
	classReentrant    = "com.alibaba.nacos.lock.core.reentrant.mutex.ReentrantAtomicLock"
	classNonReentrant = "com.alibaba.nacos.lock.core.reentrant.mutex.NonReentrantAtomicLock"
	classAtomicInt    = "java.util.concurrent.atomic.AtomicInteger"

	typeConcurrentHashMap = "java.util.concurrent.ConcurrentHashMap"
	typeHashMap           = "java.util.HashMap"
	typeLinkedList        = "java.util.LinkedList"
	typeArrayList         = "java.util.ArrayList"
)

var (
	allowedClasses = map[string]bool{classLockKey: true, classWaitEntry: true, classMutex: true,
		classReentrant: true, classNonReentrant: true, classAtomicInt: true}
	lockClasses = map[string]bool{classMutex: true, classReentrant: true, classNonReentrant: true}
	// Map types are allowed only for the top-level map; list types for wait queues.
	allowedMapTypes  = map[string]bool{typeConcurrentHashMap: true, typeHashMap: true}
	allowedListTypes = map[string]bool{typeLinkedList: true, typeArrayList: true}
)

// Limits of the structural check: a lock snapshot nests four deep (map,
// lock, queue, waiter) and its values are few per byte.
const (
	maxHessianDepth = 32
)

// hessianShape is what scanHessian learned about a stream.
type hessianShape struct {
	mapType string              // "" for an untyped map ('H'), else the typed map's type
	entries int                 // top-level map entries
	fields  map[string][]string // class name -> field names, in stream order
}

// scanHessian walks a Hessian 2 stream without building anything and
// checks that it has the shape of a Nacos lock snapshot, before the
// library decoder sees it:
//
//   - one value, a map (untyped 'H', or typed 'M' of a HashMap or
//     ConcurrentHashMap), and nothing after it;
//   - map keys are LockKey objects and values lock objects, the only map;
//   - class definitions name only Nacos lock classes (LockKey, WaitEntry,
//     the three lock classes, AtomicInteger) and typed lists only Java
//     lists; anything else is refused by name;
//   - no back references ('Q'): Nacos never writes a shared object, so a
//     reference is a cycle or a forgery, either refused;
//   - bounded nesting, and every length within the bytes that remain.
//
// This is what keeps the decoder away from input that would make it build
// a cyclic value, or panic (a map key that is not hashable).
func scanHessian(b []byte) (hessianShape, error) {
	s := &scanner{b: b, shape: hessianShape{fields: map[string][]string{}}}
	if err := s.top(); err != nil {
		return hessianShape{}, fmt.Errorf("%w: %w", ErrBadNacosSnapshot, err)
	}
	return s.shape, nil
}

type classDef struct {
	name   string
	fields []string
}

type scanner struct {
	b       []byte
	pos     int
	depth   int
	classes []classDef
	types   []string
	refs    int   // objects, lists and maps seen: Hessian numbers them for 'Q'
	open    []int // refs of the containers being read
	shape   hessianShape
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: "+format, append([]any{s.pos}, args...)...)
}

func (s *scanner) next() (byte, error) {
	if s.pos >= len(s.b) {
		return 0, s.errorf("stream ends early")
	}
	c := s.b[s.pos]
	s.pos++
	return c, nil
}

func (s *scanner) skip(n int) error {
	if n < 0 || n > len(s.b)-s.pos {
		return s.errorf("stream ends early (%d more bytes wanted)", n)
	}
	s.pos += n
	return nil
}

func (s *scanner) top() error {
	tag, err := s.next()
	if err != nil {
		return err
	}
	switch tag {
	case 'H':
	case 'M':
		t, err := s.typeName()
		if err != nil {
			return err
		}
		if !allowedMapTypes[t] {
			return s.errorf("the top-level map is a %s, not a HashMap or ConcurrentHashMap", t)
		}
		s.shape.mapType = t
	default:
		return s.errorf("the snapshot is not a map (tag %#x)", tag)
	}
	s.refs++ // the map itself is ref 0
	s.open = append(s.open, 0)
	for {
		if s.pos < len(s.b) && s.b[s.pos] == 'Z' {
			s.pos++
			break
		}
		if err := s.object(func(c string) bool { return c == classLockKey }, "map key"); err != nil {
			return err
		}
		if err := s.object(func(c string) bool { return lockClasses[c] }, "map value"); err != nil {
			return err
		}
		s.shape.entries++
	}
	if s.pos != len(s.b) {
		return s.errorf("%d bytes after the map", len(s.b)-s.pos)
	}
	return nil
}

// object reads one object whose class must satisfy want (class
// definitions before it included).
func (s *scanner) object(want func(string) bool, what string) error {
	for {
		if s.pos >= len(s.b) {
			return s.errorf("stream ends early in the map")
		}
		tag := s.b[s.pos]
		if tag != 'C' {
			break
		}
		s.pos++
		if err := s.classDef(); err != nil {
			return err
		}
	}
	tag, err := s.next()
	if err != nil {
		return err
	}
	var def int
	switch {
	case tag >= 0x60 && tag <= 0x6f:
		def = int(tag - 0x60)
	case tag == 'O':
		if def, err = s.int(); err != nil {
			return err
		}
	case tag == 'Q':
		return s.ref()
	default:
		return s.errorf("%s is not an object (tag %#x)", what, tag)
	}
	if def < 0 || def >= len(s.classes) {
		return s.errorf("object of undefined class #%d", def)
	}
	c := s.classes[def]
	if !want(c.name) {
		return s.errorf("unexpected class %s as %s", c.name, what)
	}
	return s.fields(c)
}

func (s *scanner) classDef() error {
	name, err := s.str()
	if err != nil {
		return err
	}
	if !allowedClasses[name] {
		return s.errorf("unexpected class %s (a Nacos lock snapshot holds only LockKey, WaitEntry, MutexAtomicLock, ReentrantAtomicLock, NonReentrantAtomicLock and AtomicInteger)", name)
	}
	n, err := s.int()
	if err != nil {
		return err
	}
	if n < 0 || n > len(s.b)-s.pos {
		return s.errorf("class %s declares %d fields", name, n)
	}
	fields := make([]string, n)
	for i := range fields {
		if fields[i], err = s.str(); err != nil {
			return err
		}
	}
	if _, dup := s.shape.fields[name]; dup {
		return s.errorf("class %s defined twice", name)
	}
	s.shape.fields[name] = fields
	s.classes = append(s.classes, classDef{name, fields})
	return nil
}

func (s *scanner) fields(c classDef) error {
	s.depth++
	defer func() { s.depth-- }()
	if s.depth > maxHessianDepth {
		return s.errorf("nested too deep")
	}
	s.open = append(s.open, s.refs)
	s.refs++
	for range c.fields {
		if err := s.value(); err != nil {
			return err
		}
	}
	s.open = s.open[:len(s.open)-1]
	return nil
}

func (s *scanner) ref() error {
	n, err := s.int()
	if err != nil {
		return err
	}
	for _, o := range s.open {
		if o == n {
			return s.errorf("back reference to object #%d that contains it: a cycle", n)
		}
	}
	return s.errorf("back reference to object #%d: Nacos never shares objects in a lock snapshot", n)
}

// value reads any Hessian 2 value other than a map.
func (s *scanner) value() error {
	tag, err := s.next()
	if err != nil {
		return err
	}
	switch {
	case tag <= 0x1f: // short string
		return s.chars(int(tag))
	case tag <= 0x2f: // short binary
		return s.skip(int(tag - 0x20))
	case tag <= 0x33: // medium string
		c, err := s.next()
		if err != nil {
			return err
		}
		return s.chars(int(tag-0x30)<<8 | int(c))
	case tag <= 0x37: // medium binary
		c, err := s.next()
		if err != nil {
			return err
		}
		return s.skip(int(tag-0x34)<<8 | int(c))
	case tag <= 0x3f: // three-octet long
		return s.skip(2)
	case tag >= 0x80 && tag <= 0xbf: // one-octet int
		return nil
	case tag >= 0xc0 && tag <= 0xcf: // two-octet int
		return s.skip(1)
	case tag >= 0xd0 && tag <= 0xd7: // three-octet int
		return s.skip(2)
	case tag >= 0xd8 && tag <= 0xef: // one-octet long
		return nil
	case tag >= 0xf0: // two-octet long
		return s.skip(1)
	case tag >= 0x60 && tag <= 0x6f, tag == 'O', tag == 'C':
		s.pos--
		return s.object(func(c string) bool { return c == classWaitEntry || c == classAtomicInt }, "field value")
	case tag >= 0x70 && tag <= 0x77: // fixed typed list, short
		return s.list(true, int(tag-0x70))
	case tag >= 0x78 && tag <= 0x7f: // fixed untyped list, short
		return s.list(false, int(tag-0x78))
	}
	switch tag {
	case 'N', 'T', 'F', 0x5b, 0x5c:
		return nil
	case 'A', 'B': // binary chunks
		for {
			n, err := s.uint16()
			if err != nil {
				return err
			}
			if err := s.skip(n); err != nil {
				return err
			}
			if tag == 'B' {
				return nil
			}
			if tag, err = s.next(); err != nil {
				return err
			}
			if tag != 'A' && tag != 'B' {
				return s.errorf("binary chunk followed by tag %#x", tag)
			}
		}
	case 'R', 'S':
		s.pos--
		_, err := s.str()
		return err
	case 'D', 'J', 'L':
		return s.skip(8)
	case 'I', 'K', 'Y', 0x5f:
		return s.skip(4)
	case 0x5d:
		return s.skip(1)
	case 0x5e:
		return s.skip(2)
	case 'V': // fixed typed list
		t, err := s.typeName()
		if err != nil {
			return err
		}
		n, err := s.int()
		if err != nil {
			return err
		}
		return s.listBody(t, n)
	case 'X': // fixed untyped list
		n, err := s.int()
		if err != nil {
			return err
		}
		return s.listBody("", n)
	case 'Q':
		return s.ref()
	case 'H', 'M':
		return s.errorf("unexpected map inside the lock map")
	case 'U', 'W':
		return s.errorf("unexpected variable-length list (Nacos writes fixed-length ones)")
	}
	return s.errorf("unexpected tag %#x", tag)
}

func (s *scanner) list(typed bool, n int) error {
	t := ""
	if typed {
		var err error
		if t, err = s.typeName(); err != nil {
			return err
		}
	}
	return s.listBody(t, n)
}

func (s *scanner) listBody(t string, n int) error {
	if t != "" && !allowedListTypes[t] {
		return s.errorf("unexpected list type %s", t)
	}
	if n < 0 || n > len(s.b)-s.pos {
		return s.errorf("list of %d elements in %d bytes", n, len(s.b)-s.pos)
	}
	s.depth++
	defer func() { s.depth-- }()
	if s.depth > maxHessianDepth {
		return s.errorf("nested too deep")
	}
	s.open = append(s.open, s.refs)
	s.refs++
	for range n {
		if err := s.value(); err != nil {
			return err
		}
	}
	s.open = s.open[:len(s.open)-1]
	return nil
}

// typeName reads a type: a string (added to the type table) or an int
// index into it.
func (s *scanner) typeName() (string, error) {
	if s.pos >= len(s.b) {
		return "", s.errorf("stream ends early")
	}
	c := s.b[s.pos]
	if c <= 0x1f || (c >= 0x30 && c <= 0x33) || c == 'R' || c == 'S' {
		t, err := s.str()
		if err != nil {
			return "", err
		}
		s.types = append(s.types, t)
		return t, nil
	}
	i, err := s.int()
	if err != nil {
		return "", err
	}
	if i < 0 || i >= len(s.types) {
		return "", s.errorf("type reference #%d undefined", i)
	}
	return s.types[i], nil
}

// int reads a Hessian int.
func (s *scanner) int() (int, error) {
	tag, err := s.next()
	if err != nil {
		return 0, err
	}
	switch {
	case tag >= 0x80 && tag <= 0xbf:
		return int(tag) - 0x90, nil
	case tag >= 0xc0 && tag <= 0xcf:
		c, err := s.next()
		return (int(tag)-0xc8)<<8 | int(c), err
	case tag >= 0xd0 && tag <= 0xd7:
		if err := s.skip(2); err != nil {
			return 0, err
		}
		return (int(tag)-0xd4)<<16 | int(s.b[s.pos-2])<<8 | int(s.b[s.pos-1]), nil
	case tag == 'I':
		if err := s.skip(4); err != nil {
			return 0, err
		}
		return int(int32(binary.BigEndian.Uint32(s.b[s.pos-4:]))), nil
	}
	return 0, s.errorf("expected an int, found tag %#x", tag)
}

func (s *scanner) uint16() (int, error) {
	if err := s.skip(2); err != nil {
		return 0, err
	}
	return int(binary.BigEndian.Uint16(s.b[s.pos-2:])), nil
}

// str reads a string (all its chunks) and returns its bytes.
func (s *scanner) str() (string, error) {
	var out []byte
	for {
		tag, err := s.next()
		if err != nil {
			return "", err
		}
		var n int
		final := true
		switch {
		case tag <= 0x1f:
			n = int(tag)
		case tag >= 0x30 && tag <= 0x33:
			c, err := s.next()
			if err != nil {
				return "", err
			}
			n = int(tag-0x30)<<8 | int(c)
		case tag == 'S' || tag == 'R':
			if n, err = s.uint16(); err != nil {
				return "", err
			}
			final = tag == 'S'
		default:
			return "", s.errorf("expected a string, found tag %#x", tag)
		}
		from := s.pos
		if err := s.chars(n); err != nil {
			return "", err
		}
		out = append(out, s.b[from:s.pos]...)
		if final {
			return string(out), nil
		}
	}
}

// chars skips n characters of Hessian's UTF-8: a character is one to
// three bytes (Java writes each half of a surrogate pair as three bytes);
// a four-byte sequence, which other writers use, counts as two.
func (s *scanner) chars(n int) error {
	for i := 0; i < n; i++ {
		c, err := s.next()
		if err != nil {
			return err
		}
		switch {
		case c < 0x80:
		case c&0xe0 == 0xc0:
			err = s.skip(1)
		case c&0xf0 == 0xe0:
			err = s.skip(2)
		case c&0xf8 == 0xf0:
			err = s.skip(3)
			i++
		default:
			err = s.errorf("invalid UTF-8 lead byte %#x in a string", c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
