package httpapi

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// Prepared queries: /v1/query (POST create, GET list) and
// /v1/query/<id> (GET, PUT, DELETE), /v1/query/<id-or-name>/execute and
// /explain (GET), with Consul's JSON and statuses: a query that does not
// exist is 404 "Query not found" on reads, executes and explains, while a
// write's refusal is Consul's 500 with the server's message.

// preparedQueryCreateResponse is the POST /v1/query answer.
type preparedQueryCreateResponse struct {
	ID string
}

// preparedQueryGeneral handles /v1/query.
func (s *Server) preparedQueryGeneral(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method == http.MethodGet {
		var args structs.DCSpecificRequest
		if err := s.parseQuery(r, &args.QueryOptions); err != nil {
			return nil, err
		}
		var out structs.IndexedPreparedQueries
		defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
		if err := structs.MethodPreparedQueryList.Call(r.Context(), s.rpc, &args, &out); err != nil {
			return nil, err
		}
		return nonNilQueries(out.Queries), nil
	}
	req := structs.PreparedQueryRequest{Op: structs.PreparedQueryCreate, Query: &structs.PreparedQuery{}}
	s.parseWrite(r, &req.WriteRequest)
	if err := decodeRequest(r, req.Query); err != nil {
		return nil, err
	}
	var id string
	if err := structs.MethodPreparedQueryApply.Call(r.Context(), s.rpc, &req, &id); err != nil {
		return nil, err
	}
	return preparedQueryCreateResponse{ID: id}, nil
}

// preparedQuerySpecific handles /v1/query/<id> and its /execute and
// /explain.
func (s *Server) preparedQuerySpecific(w http.ResponseWriter, r *http.Request) (any, error) {
	id := pathSuffix(r, "/v1/query/")
	if name, ok := strings.CutSuffix(id, "/execute"); ok {
		return s.preparedQueryExecute(w, r, name)
	}
	if name, ok := strings.CutSuffix(id, "/explain"); ok {
		return s.preparedQueryExplain(w, r, name)
	}
	if id == "" || strings.Contains(id, "/") {
		return nil, &httpError{code: http.StatusNotFound, msg: "Query not found"}
	}
	switch r.Method {
	case http.MethodGet:
		args := structs.PreparedQuerySpecificRequest{QueryID: id}
		if err := s.parseQuery(r, &args.QueryOptions); err != nil {
			return nil, err
		}
		var out structs.IndexedPreparedQueries
		defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
		if err := structs.MethodPreparedQueryGet.Call(r.Context(), s.rpc, &args, &out); err != nil {
			return nil, queryNotFound(err)
		}
		return nonNilQueries(out.Queries), nil
	case http.MethodPut:
		req := structs.PreparedQueryRequest{Op: structs.PreparedQueryUpdate, Query: &structs.PreparedQuery{}}
		s.parseWrite(r, &req.WriteRequest)
		if err := decodeRequest(r, req.Query); err != nil {
			return nil, err
		}
		// The path names the query, whatever the body says.
		req.Query.ID = id
		return nil, structs.MethodPreparedQueryApply.Call(r.Context(), s.rpc, &req, new(string))
	case http.MethodDelete:
		req := structs.PreparedQueryRequest{Op: structs.PreparedQueryDelete, Query: &structs.PreparedQuery{ID: id}}
		s.parseWrite(r, &req.WriteRequest)
		return nil, structs.MethodPreparedQueryApply.Call(r.Context(), s.rpc, &req, new(string))
	}
	return nil, &methodNotAllowedError{method: r.Method, allow: []string{http.MethodGet, http.MethodPut, http.MethodDelete}}
}

// parseExecute fills an execute or explain request: ?near= (with "_agent"
// and "_ip" left for the server, which knows the query's own Near too),
// ?limit=, ?connect=, the agent running it and the client's address.
func (s *Server) parseExecute(r *http.Request, name string) (*structs.PreparedQueryExecuteRequest, error) {
	if r.Method != http.MethodGet {
		return nil, &methodNotAllowedError{method: r.Method, allow: []string{http.MethodGet}}
	}
	args := &structs.PreparedQueryExecuteRequest{
		QueryIDOrName: name,
		Agent:         structs.QuerySource{Datacenter: s.dc, Node: s.nodeName},
		SourceIP:      clientIP(r),
	}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	if near := r.URL.Query().Get("near"); near != "" {
		args.Source = structs.QuerySource{Datacenter: s.dc, Node: near}
	}
	if raw := r.URL.Query().Get("connect"); raw != "" {
		c, err := strconv.ParseBool(raw)
		if err != nil {
			return nil, badRequest("Bad connect: " + raw)
		}
		args.Connect = c
	}
	if raw := r.URL.Query().Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 {
			return nil, badRequest("Bad limit: " + raw)
		}
		args.Limit = n
	}
	return args, nil
}

func (s *Server) preparedQueryExecute(w http.ResponseWriter, r *http.Request, name string) (any, error) {
	args, err := s.parseExecute(r, name)
	if err != nil {
		return nil, err
	}
	var out structs.PreparedQueryExecuteResponse
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodPreparedQueryExecute.Call(r.Context(), s.rpc, args, &out); err != nil {
		return nil, queryNotFound(err)
	}
	if out.Nodes == nil {
		out.Nodes = structs.CheckServiceNodes{}
	}
	return out, nil
}

func (s *Server) preparedQueryExplain(w http.ResponseWriter, r *http.Request, name string) (any, error) {
	args, err := s.parseExecute(r, name)
	if err != nil {
		return nil, err
	}
	var out structs.PreparedQueryExplainResponse
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodPreparedQueryExplain.Call(r.Context(), s.rpc, args, &out); err != nil {
		return nil, queryNotFound(err)
	}
	return out, nil
}

// queryNotFound gives a missing query Consul's 404.
func queryNotFound(err error) error {
	if errors.Is(err, structs.ErrQueryNotFound) {
		return &httpError{code: http.StatusNotFound, msg: err.Error()}
	}
	return err
}

func nonNilQueries(qs structs.PreparedQueries) structs.PreparedQueries {
	if qs == nil {
		return structs.PreparedQueries{}
	}
	return qs
}

// clientIP is the address Near "_ip" looks up: the first of
// X-Forwarded-For, else the connection's peer, as in Consul.
func clientIP(r *http.Request) string {
	if fwd := r.Header.Get("X-Forwarded-For"); fwd != "" {
		first, _, _ := strings.Cut(fwd, ",")
		return strings.TrimSpace(first)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
