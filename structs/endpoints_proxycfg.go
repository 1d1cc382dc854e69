package structs

// The internal RPC methods that serve client agents the derived reads
// behind proxy configuration (see endpoints.go for the conventions); a
// server answers them with the same functions its local data sources use.
var (
	// MethodResolveServiceConfig merges proxy-defaults and
	// service-defaults for a proxied service and its upstreams.
	MethodResolveServiceConfig = readMethod[ServiceConfigRequest, ServiceConfigResponse]("ConfigEntry.ResolveServiceConfig")
	// MethodIntentionUpstreams lists the services intentions allow a
	// service to reach.
	MethodIntentionUpstreams = readMethod[ServiceSpecificRequest, ServiceNames]("Internal.IntentionUpstreams")
	// MethodGatewayServices lists the services an ingress or terminating
	// gateway routes to.
	MethodGatewayServices = readMethod[ServiceSpecificRequest, IndexedGatewayServices]("Internal.GatewayServices")
	// MethodServicesByKind lists every instance of a service kind with
	// its checks.
	MethodServicesByKind = readMethod[ServiceKindRequest, IndexedCheckServiceNodes]("Internal.ServicesByKind")
)
