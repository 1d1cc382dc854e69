package structs

// The internal RPC methods of config entries, intentions and discovery
// chains (see endpoints.go for the conventions). Writes go to the leader;
// reads are blocking queries with the usual consistency modes.
const (
	// MethodConfigEntryApply upserts an entry (Op upsert or upsert-cas);
	// the reply is false when a CAS failed.
	MethodConfigEntryApply = "ConfigEntry.Apply" // *ConfigEntryRequest -> *bool
	// MethodConfigEntryDelete deletes an entry (Op delete or delete-cas).
	MethodConfigEntryDelete = "ConfigEntry.Delete" // *ConfigEntryRequest -> *ConfigEntryDeleteResponse
	MethodConfigEntryGet    = "ConfigEntry.Get"    // *ConfigEntryQuery -> *ConfigEntryResponse
	MethodConfigEntryList   = "ConfigEntry.List"   // *ConfigEntryQuery -> *IndexedConfigEntries

	// MethodIntentionApply writes one intention, as a write of the
	// destination's service-intentions entry: upsert or delete by source
	// and destination, or the legacy create, update and delete by ID.
	MethodIntentionApply = "Intention.Apply" // *IntentionRequest -> *string (the ID of a write by ID, else "")
	MethodIntentionGet   = "Intention.Get"   // *IntentionQueryRequest (IntentionID or Exact) -> *IndexedIntentions
	MethodIntentionList  = "Intention.List"  // *DCSpecificRequest -> *IndexedIntentions
	MethodIntentionMatch = "Intention.Match" // *IntentionQueryRequest (Match) -> *IndexedIntentionMatches
	MethodIntentionCheck = "Intention.Check" // *IntentionQueryRequest (Check) -> *IntentionQueryCheckResponse

	MethodDiscoveryChainGet = "DiscoveryChain.Get" // *DiscoveryChainRequest -> *DiscoveryChainResponse
)
