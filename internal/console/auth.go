package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// tokenCookie holds the admin token a login gave. HttpOnly keeps it from
// scripts; SameSite=Strict keeps other sites' pages from sending it.
const (
	tokenCookie    = "strand_console_token"
	tokenCookieAge = 12 * time.Hour
)

var errCrossOrigin = errors.New("the form came from another origin (Origin or Referer is not this console's); reload the page and submit it again")

// sameOrigin lets h run only for a request whose Origin, or failing
// that Referer, is this console's own scheme and host. Browsers send
// Origin with every form POST, so a page of another site cannot submit
// the console's forms, whatever cookies or loopback address it rides
// on; a request with neither header is refused too.
func (c *Console) sameOrigin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !fromSameOrigin(r) {
			c.fail(w, r, http.StatusForbidden, errCrossOrigin)
			return
		}
		h(w, r)
	}
}

func fromSameOrigin(r *http.Request) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	own := scheme + "://" + r.Host
	if o := r.Header.Get("Origin"); o != "" {
		return o == own
	}
	ref, err := url.Parse(r.Header.Get("Referer"))
	if err != nil || ref.Host == "" {
		return false
	}
	return ref.Scheme+"://"+ref.Host == own
}

// admin lets h, a form's handler, run only for a same-origin request
// that Config.Authorize accepts, with the login cookie's token as its
// bearer token.
func (c *Console) admin(h http.HandlerFunc) http.HandlerFunc {
	return c.sameOrigin(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if code, err := c.cfg.Authorize(withCookieToken(r)); err != nil {
			c.refuse(w, r, code, err, refererPath(r))
			return
		}
		h(w, r)
	})
}

// authorized lets h, a page's handler, run only for a request that
// Config.Authorize accepts, with the login cookie's token as its bearer
// token: the pages show topics, records, groups and the cluster's
// layout, which are no one else's to see.
func (c *Console) authorized(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if code, err := c.cfg.Authorize(withCookieToken(r)); err != nil {
			c.refuse(w, r, code, err, safeNext(r.URL.Path))
			return
		}
		h(w, r)
	}
}

// refuse renders the refusal of a request, with a link to log in and
// come back to next when a token would do.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, code int, err error, next string) {
	c.render(w, r, code, "message", page{Title: "Not allowed", Data: messageData{
		Code: code, Err: err.Error(), Login: code == http.StatusUnauthorized, Next: next,
	}})
}

// withCookieToken returns r with the login cookie's token as its bearer
// token, unless r carries one already.
func withCookieToken(r *http.Request) *http.Request {
	ck, err := r.Cookie(tokenCookie)
	if err != nil || ck.Value == "" || r.Header.Get("Authorization") != "" {
		return r
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+ck.Value)
	return r2
}

type loginData struct {
	// Open: changes are allowed without a token (a loopback agent
	// without one, or a verified client certificate).
	Open     bool
	LoggedIn bool
	Next     string
	Err      string
}

func (c *Console) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	_, err := c.cfg.Authorize(withCookieToken(r))
	_, cookieErr := r.Cookie(tokenCookie)
	d := loginData{Next: safeNext(r.URL.Query().Get("next"))}
	d.Open = err == nil && cookieErr != nil
	d.LoggedIn = err == nil && cookieErr == nil
	c.render(w, r, http.StatusOK, "login", page{Title: "Log in", Nav: "login", Data: d})
}

func (c *Console) handleLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	tok := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	check := r.Clone(r.Context())
	check.Header.Set("Authorization", "Bearer "+tok)
	if code, err := c.cfg.Authorize(check); err != nil || tok == "" {
		if err == nil {
			err = errors.New("enter the admin token")
			code = http.StatusBadRequest
		}
		c.render(w, r, code, "login", page{Title: "Log in", Nav: "login", Data: loginData{Next: next, Err: err.Error()}})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: tokenCookie, Value: tok, Path: Prefix, MaxAge: int(tokenCookieAge.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	done(w, r, next, "logged in")
}

func (c *Console) handleLogout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: tokenCookie, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	done(w, r, Prefix, "logged out")
}

// safeNext keeps a post-login redirect inside the console: a link
// naming another site must not turn the login into an open redirect.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, Prefix) || strings.Contains(next, "\\") {
		return Prefix
	}
	return u.Path
}

// refererPath is the path of the page r was sent from, for a login to
// return to; fromSameOrigin has checked it is this console's.
func refererPath(r *http.Request) string {
	ref, err := url.Parse(r.Referer())
	if err != nil {
		return Prefix
	}
	return safeNext(ref.Path)
}
