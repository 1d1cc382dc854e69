package structs

import (
	"reflect"
	"time"
)

// CloneConfigEntry returns a deep copy of e that shares no memory with it
// (the state store copies every entry in and out, so that callers may
// modify what they pass and what they get).
func CloneConfigEntry(e ConfigEntry) ConfigEntry {
	if e == nil {
		return nil
	}
	return deepCopy(reflect.ValueOf(e)).Interface().(ConfigEntry)
}

// CloneIntention returns a deep copy of an intention.
func CloneIntention(x *Intention) *Intention {
	if x == nil {
		return nil
	}
	return deepCopy(reflect.ValueOf(x)).Interface().(*Intention)
}

// CloneDiscoveryChain returns a deep copy of a compiled chain.
func CloneDiscoveryChain(c *CompiledDiscoveryChain) *CompiledDiscoveryChain {
	if c == nil {
		return nil
	}
	return deepCopy(reflect.ValueOf(c)).Interface().(*CompiledDiscoveryChain)
}

// deepCopy copies v recursively through pointers, slices, maps and
// interfaces. Struct fields that are not exported are copied shallowly
// (time.Time's, which are immutable).
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return reflect.Zero(v.Type())
		}
		n := reflect.New(v.Type().Elem())
		n.Elem().Set(deepCopy(v.Elem()))
		return n
	case reflect.Struct:
		n := reflect.New(v.Type()).Elem()
		n.Set(v)
		for i := range v.NumField() {
			if f := n.Field(i); f.CanSet() {
				f.Set(deepCopy(v.Field(i)))
			}
		}
		return n
	case reflect.Slice:
		if v.IsNil() {
			return reflect.Zero(v.Type())
		}
		n := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			n.Index(i).Set(deepCopy(v.Index(i)))
		}
		return n
	case reflect.Map:
		if v.IsNil() {
			return reflect.Zero(v.Type())
		}
		n := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			n.SetMapIndex(deepCopy(it.Key()), deepCopy(it.Value()))
		}
		return n
	case reflect.Interface:
		if v.IsNil() {
			return reflect.Zero(v.Type())
		}
		n := reflect.New(v.Type()).Elem()
		n.Set(deepCopy(v.Elem()))
		return n
	default:
		return v
	}
}

// ConfigEntriesEqual reports whether two entries have the same content,
// ignoring their Raft indexes. Nil and empty lists and maps count as equal,
// and so do numbers of different Go types inside opaque maps: JSON clients
// and the msgpack codec turn one into the other, and a rewrite that only
// differs so must be recognised as identical (Consul answers it without a
// write).
func ConfigEntriesEqual(a, b ConfigEntry) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if a.GetKind() != b.GetKind() || a.GetName() != b.GetName() {
		return false
	}
	return equalValues(reflect.ValueOf(a), reflect.ValueOf(b))
}

func equalValues(a, b reflect.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return equalValues(a.Elem(), b.Elem())
	case reflect.Struct:
		switch a.Type() {
		case raftIndexType:
			return true
		case timeType:
			return a.Interface().(time.Time).Equal(b.Interface().(time.Time))
		}
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() && !equalValues(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equalValues(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		it := a.MapRange()
		for it.Next() {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() || !equalValues(it.Value(), bv) {
				return false
			}
		}
		return true
	case reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		ae, be := a.Elem(), b.Elem()
		if fa, ok := asFloat(ae); ok {
			fb, ok := asFloat(be)
			return ok && fa == fb
		}
		if ae.Type() != be.Type() {
			return false
		}
		return equalValues(ae, be)
	default:
		return a.Interface() == b.Interface()
	}
}

// asFloat returns the value of any numeric kind as a float64.
func asFloat(v reflect.Value) (float64, bool) {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(v.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(v.Uint()), true
	case reflect.Float32, reflect.Float64:
		return v.Float(), true
	}
	return 0, false
}
