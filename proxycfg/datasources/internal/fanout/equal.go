package fanout

import "reflect"

// SameResult reports whether two results hold the same data: deeply
// equal once an embedded QueryMeta (the index and freshness of the read)
// is ignored. A blocking query wakes whenever its index moves, and
// indexes are shared by many results (every intention has the index of
// the intentions table), so comparing by index alone would send unchanged
// data to every proxy on each unrelated write.
func SameResult(a, b any) bool {
	if a == nil || b == nil {
		return a == b
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() {
		return false
	}
	if va.Kind() != reflect.Pointer || va.IsNil() || vb.IsNil() || va.Elem().Kind() != reflect.Struct {
		return reflect.DeepEqual(a, b)
	}
	if va.Pointer() == vb.Pointer() {
		return true
	}
	ca, cb := withoutMeta(va.Elem()), withoutMeta(vb.Elem())
	return reflect.DeepEqual(ca.Interface(), cb.Interface())
}

// withoutMeta returns an addressable shallow copy of the struct v with its
// QueryMeta field (if any) zeroed.
func withoutMeta(v reflect.Value) reflect.Value {
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	if f := c.FieldByName("QueryMeta"); f.IsValid() && f.CanSet() {
		f.Set(reflect.Zero(f.Type()))
	}
	return c
}
