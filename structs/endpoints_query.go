package structs

// The internal RPC methods of prepared queries (/v1/query; see
// endpoints.go for the conventions).
var (
	// MethodPreparedQueryApply creates, updates or deletes a query; the
	// reply is the query's ID.
	MethodPreparedQueryApply = writeMethod[PreparedQueryRequest, string]("PreparedQuery.Apply")
	// MethodPreparedQueryGet reads one query by ID; ErrQueryNotFound when
	// there is none.
	MethodPreparedQueryGet = readMethod[PreparedQuerySpecificRequest, IndexedPreparedQueries]("PreparedQuery.Get")
	// MethodPreparedQueryList lists every query.
	MethodPreparedQueryList = readMethod[DCSpecificRequest, IndexedPreparedQueries]("PreparedQuery.List")
	// MethodPreparedQueryExecute runs a query by ID or name.
	MethodPreparedQueryExecute = readMethod[PreparedQueryExecuteRequest, PreparedQueryExecuteResponse]("PreparedQuery.Execute")
	// MethodPreparedQueryExplain resolves a query by ID or name and
	// renders its template without running it.
	MethodPreparedQueryExplain = readMethod[PreparedQueryExecuteRequest, PreparedQueryExplainResponse]("PreparedQuery.Explain")
)
