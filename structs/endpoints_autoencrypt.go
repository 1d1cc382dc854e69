package structs

// MethodAutoEncryptSign signs a client agent's auto_encrypt CSR with the
// Connect CA (Consul's AutoEncrypt.Sign). Servers answer it only with
// auto_encrypt.allow_tls (ErrAutoEncryptNotAllowed otherwise); it is the
// one method a connection without a client certificate may call on a
// server that verifies incoming connections. It runs on the leader, which
// holds the CA's signing state.
var MethodAutoEncryptSign = writeMethod[AutoEncryptSignRequest, SignedResponse]("AutoEncrypt.Sign")

// AutoEncryptSignRequest asks for the agent certificate of one client
// agent: CSR carries its SPIFFE agent ID
// (spiffe://<trust domain>/agent/client/dc/<dc>/id/<node id>) and the
// DNS and IP SANs it wants; Node is the agent's node name.
type AutoEncryptSignRequest struct {
	Node string
	CSR  string
	WriteRequest
}

// SignedResponse is what a client agent needs to take part in TLS: its
// certificate, the Connect CA roots that signed it, the servers' own CA
// certificates (ManualCARoots, the PEM of their tls CA files), and whether
// the servers' names are verified.
type SignedResponse struct {
	IssuedCert           IssuedCert
	ConnectCARoots       IndexedCARoots
	ManualCARoots        []string
	VerifyServerHostname bool
}
