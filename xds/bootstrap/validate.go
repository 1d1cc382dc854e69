package bootstrap

import (
	"fmt"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// Parse reads a bootstrap as Envoy does (JSON, unknown fields rejected) and
// validates it. It is how tests and tools check a bootstrap they were given.
func Parse(data []byte) (*bootstrapv3.Bootstrap, error) {
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidBootstrap, err)
	}
	if err := Validate(&b); err != nil {
		return nil, err
	}
	return &b, nil
}

// Validate checks m and every message packed in an Any inside it against
// the Envoy protos' validation rules. The generated ValidateAll does not
// descend into Any fields, but Envoy unpacks and validates them at load
// time, so a bad typed config would pass ValidateAll and still be
// rejected. An Any whose type is not linked into this binary is an error
// too: it cannot be checked. For a Bootstrap, Validate also checks that
// the ADS gRPC service names a static cluster.
func Validate(m proto.Message) error {
	if err := validateTree(m, "bootstrap"); err != nil {
		return err
	}
	if b, ok := m.(*bootstrapv3.Bootstrap); ok {
		return checkADSCluster(b)
	}
	return nil
}

// validateTree runs ValidateAll on root, then on every Any below it.
func validateTree(root proto.Message, where string) error {
	if v, ok := root.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidBootstrap, where, err)
		}
	}
	return walkAnys(root.ProtoReflect(), where)
}

// walkAnys finds the Any messages below m and validates what they hold.
func walkAnys(m protoreflect.Message, where string) error {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%w: %s: unpacking %s: %w", ErrInvalidBootstrap, where, a.GetTypeUrl(), err)
		}
		return validateTree(inner, where+"<"+string(inner.ProtoReflect().Descriptor().FullName())+">")
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		at := where + "." + string(fd.Name())
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = walkAnys(l.Get(i).Message(), fmt.Sprintf("%s[%d]", at, i))
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				err = walkAnys(mv.Message(), fmt.Sprintf("%s[%v]", at, k.Interface()))
				return err == nil
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			err = walkAnys(v.Message(), at)
		}
		return err == nil
	})
	return err
}

// checkADSCluster fails when the ADS service points at an Envoy gRPC
// cluster the bootstrap does not define statically: Envoy refuses to start.
func checkADSCluster(b *bootstrapv3.Bootstrap) error {
	static := map[string]bool{}
	for _, c := range b.GetStaticResources().GetClusters() {
		static[c.GetName()] = true
	}
	for _, g := range b.GetDynamicResources().GetAdsConfig().GetGrpcServices() {
		if name := g.GetEnvoyGrpc().GetClusterName(); name != "" && !static[name] {
			return fmt.Errorf("%w: ads_config names cluster %q, which is not a static cluster", ErrInvalidBootstrap, name)
		}
	}
	return nil
}
