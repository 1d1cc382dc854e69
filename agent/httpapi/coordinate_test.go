package httpapi

import (
	"testing"

	"github.com/hashicorp/serf/coordinate"

	"github.com/trellis-mesh/trellis/structs"
)

func TestCoordinateEndpoints(t *testing.T) {
	c := coordinate.NewCoordinate(coordinate.DefaultConfig())
	coordJSON := `{"Vec":[0,0,0,0,0,0,0,0],"Error":1.5,"Adjustment":0,"Height":0.00001}`
	two := structs.IndexedCoordinates{Coordinates: structs.Coordinates{
		{Node: "a", Coord: c}, {Node: "a", Segment: "alpha", Coord: c},
	}, QueryMeta: meta(9)}
	near := func(node string) structs.QuerySource { return structs.QuerySource{Datacenter: testDC, Node: node} }
	runCases(t, []apiCase{
		{
			name: "nodes", path: "/v1/coordinate/nodes",
			setup:    func(f *fakeRPC, _ *Config) { f.replies["Coordinate.ListNodes"] = two },
			wantCode: 200, wantJSON: true,
			wantBody:    `[{"Node":"a","Segment":"","Coord":` + coordJSON + `},{"Node":"a","Segment":"alpha","Coord":` + coordJSON + `}]`,
			wantHeaders: readHeaders("9"),
			wantCalls:   []rpcCall{{Method: "Coordinate.ListNodes", Args: structs.DCSpecificRequest{QueryOptions: qo()}}},
		},
		{
			name: "nodes of one segment", path: "/v1/coordinate/nodes?segment=alpha",
			setup:    func(f *fakeRPC, _ *Config) { f.replies["Coordinate.ListNodes"] = two },
			wantCode: 200, wantJSON: true, anyCalls: true,
			wantBody: `[{"Node":"a","Segment":"alpha","Coord":` + coordJSON + `}]`,
		},
		{
			name: "no coordinates is an empty list", path: "/v1/coordinate/nodes",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies["Coordinate.ListNodes"] = structs.IndexedCoordinates{QueryMeta: meta(3)}
			},
			wantCode: 200, wantBody: `[]`, anyCalls: true,
		},
		{
			name: "one node", path: "/v1/coordinate/node/a?segment=",
			setup:    func(f *fakeRPC, _ *Config) { f.replies["Coordinate.Node"] = two },
			wantCode: 200, wantJSON: true,
			wantBody:  `[{"Node":"a","Segment":"","Coord":` + coordJSON + `}]`,
			wantCalls: []rpcCall{{Method: "Coordinate.Node", Args: structs.NodeSpecificRequest{Node: "a", QueryOptions: qo()}}},
		},
		{
			name: "a node without coordinates is 404 with no body", path: "/v1/coordinate/node/nope",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies["Coordinate.Node"] = structs.IndexedCoordinates{QueryMeta: meta(3)}
			},
			wantCode: 404, wantBody: "", anyCalls: true, wantHeaders: map[string]string{"X-Consul-Index": "3"},
		},
		{
			name: "datacenters", path: "/v1/coordinate/datacenters",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies["Coordinate.ListDatacenters"] = []structs.DatacenterMap{{Datacenter: "dc1", AreaID: "WAN"}}
			},
			wantCode: 200, wantJSON: true, wantBody: `[{"Datacenter":"dc1","AreaID":"WAN","Coordinates":[]}]`,
			wantCalls: []rpcCall{{Method: "Coordinate.ListDatacenters", Args: structs.DCSpecificRequest{}}},
		},
		{
			name: "update", method: "PUT", path: "/v1/coordinate/update",
			body:     `{"Node":"a","Segment":"","Coord":` + coordJSON + `}`,
			wantCode: 200, wantBody: "",
			wantCalls: []rpcCall{{Method: "Coordinate.Update", Args: structs.CoordinateUpdateRequest{Node: "a", Coord: c, WriteRequest: wr()}}},
		},
		{
			name: "update with a bad body", method: "PUT", path: "/v1/coordinate/update", body: `{"Coord":[1]}`,
			wantCode: 400, skipBody: true,
		},
		{
			name: "near on catalog nodes", path: "/v1/catalog/nodes?near=web1",
			setup:    func(f *fakeRPC, _ *Config) { f.replies["Catalog.ListNodes"] = structs.IndexedNodes{QueryMeta: meta(2)} },
			wantCode: 200, wantBody: `[]`,
			wantCalls: []rpcCall{{Method: "Catalog.ListNodes", Args: structs.DCSpecificRequest{Source: near("web1"), QueryOptions: qo()}}},
		},
		{
			name: "near=_agent is this agent's node", path: "/v1/health/service/web?near=_agent",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies["Health.ServiceNodes"] = structs.IndexedCheckServiceNodes{QueryMeta: meta(2)}
			},
			wantCode: 200, wantBody: `[]`,
			wantCalls: []rpcCall{{Method: "Health.ServiceNodes", Args: structs.ServiceSpecificRequest{ServiceName: "web", Source: near(testNode), QueryOptions: qo()}}},
		},
		{
			name: "near on catalog service", path: "/v1/catalog/service/web?near=n2",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies["Catalog.ServiceNodes"] = structs.IndexedServiceNodes{QueryMeta: meta(2)}
			},
			wantCode: 200, wantBody: `[]`,
			wantCalls: []rpcCall{{Method: "Catalog.ServiceNodes", Args: structs.ServiceSpecificRequest{ServiceName: "web", Source: near("n2"), QueryOptions: qo()}}},
		},
	})
}
