package fanout

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Key names the question a request asks of a data source of the given
// kind, for deduplication: two requests whose fields are deeply equal
// (the ACL token included) give the same key; pointers are followed, so
// equal requests built separately still match. The blocking parameters
// (MinQueryIndex, MaxQueryTime) are the source's business and are left
// out. req is not modified.
//
// The key holds the token: never log it.
func Key(kind string, req any) string {
	var b strings.Builder
	b.WriteString(kind)
	b.WriteByte('|')
	writeKey(&b, reflect.ValueOf(req), 0)
	return b.String()
}

// maxKeyDepth stops a cyclic structure (no request has one) from
// recursing forever.
const maxKeyDepth = 16

func writeKey(b *strings.Builder, v reflect.Value, depth int) {
	if depth > maxKeyDepth {
		b.WriteString("…")
		return
	}
	switch v.Kind() {
	case reflect.Invalid:
		b.WriteString("<nil>")
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("<nil>")
			return
		}
		writeKey(b, v.Elem(), depth+1)
	case reflect.Struct:
		t := v.Type()
		b.WriteByte('{')
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Name == "MinQueryIndex" || f.Name == "MaxQueryTime" {
				continue
			}
			b.WriteString(f.Name)
			b.WriteByte(':')
			writeKey(b, v.Field(i), depth+1)
			b.WriteByte(' ')
		}
		b.WriteByte('}')
	case reflect.Map:
		if v.IsNil() || v.Len() == 0 {
			b.WriteString("map[]")
			return
		}
		keys := make([]string, 0, v.Len())
		vals := make(map[string]reflect.Value, v.Len())
		for it := v.MapRange(); it.Next(); {
			var kb strings.Builder
			writeKey(&kb, it.Key(), depth+1)
			keys = append(keys, kb.String())
			vals[kb.String()] = it.Value()
		}
		slices.Sort(keys)
		b.WriteString("map[")
		for _, k := range keys {
			fmt.Fprintf(b, "%q:", k)
			writeKey(b, vals[k], depth+1)
			b.WriteByte(' ')
		}
		b.WriteByte(']')
	case reflect.Slice, reflect.Array:
		b.WriteByte('[')
		for i := range v.Len() {
			writeKey(b, v.Index(i), depth+1)
			b.WriteByte(' ')
		}
		b.WriteByte(']')
	case reflect.String:
		fmt.Fprintf(b, "%q", v.String())
	default:
		fmt.Fprint(b, v)
	}
}
