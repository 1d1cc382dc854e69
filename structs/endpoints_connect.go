package structs

// The internal RPC methods of config entries, intentions and discovery
// chains (see endpoints.go for the conventions). Writes go to the leader;
// reads are blocking queries with the usual consistency modes.
var (
	// MethodConfigEntryApply upserts an entry (Op upsert or upsert-cas);
	// the reply is false when a CAS failed.
	MethodConfigEntryApply = writeMethod[ConfigEntryRequest, bool]("ConfigEntry.Apply")
	// MethodConfigEntryDelete deletes an entry (Op delete or delete-cas).
	MethodConfigEntryDelete = writeMethod[ConfigEntryRequest, ConfigEntryDeleteResponse]("ConfigEntry.Delete")
	MethodConfigEntryGet    = readMethod[ConfigEntryQuery, ConfigEntryResponse]("ConfigEntry.Get")
	MethodConfigEntryList   = readMethod[ConfigEntryQuery, IndexedConfigEntries]("ConfigEntry.List")
	// MethodExportedServicesList resolves the exported-services entry
	// (GET /v1/exported-services).
	MethodExportedServicesList = readMethod[ExportedServicesQuery, IndexedExportedServices]("ConfigEntry.ResolvedExportedServices")

	// MethodIntentionApply writes one intention, as a write of the
	// destination's service-intentions entry: upsert or delete by source
	// and destination, or the legacy create, update and delete by ID.
	MethodIntentionApply = writeMethod[IntentionRequest, string]("Intention.Apply")              // (the ID of a write by ID, else "")
	MethodIntentionGet   = readMethod[IntentionQueryRequest, IndexedIntentions]("Intention.Get") // (IntentionID or Exact)
	MethodIntentionList  = readMethod[DCSpecificRequest, IndexedIntentions]("Intention.List")
	MethodIntentionMatch = readMethod[IntentionQueryRequest, IndexedIntentionMatches]("Intention.Match")     // (Match)
	MethodIntentionCheck = readMethod[IntentionQueryRequest, IntentionQueryCheckResponse]("Intention.Check") // (Check)

	MethodDiscoveryChainGet = readMethod[DiscoveryChainRequest, DiscoveryChainResponse]("DiscoveryChain.Get")
)
