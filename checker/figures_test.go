package checker

import (
	"reflect"
	"testing"
)

// TestFigureNamesAreJSONNames: each figure has one name, the same in
// results.edn (figureNames) and table.json (the struct's json tags).
func TestFigureNamesAreJSONNames(t *testing.T) {
	var f LockFigures
	tags := map[uintptr]string{}
	v, typ := reflect.ValueOf(&f).Elem(), reflect.TypeOf(f)
	for i := range typ.NumField() {
		tags[v.Field(i).Addr().Pointer()] = typ.Field(i).Tag.Get("json")
	}
	for _, fig := range f.figureNames() {
		if tag := tags[reflect.ValueOf(fig.p).Pointer()]; tag != fig.name {
			t.Errorf("figure %q is %q in table.json", fig.name, tag)
		}
	}
}
