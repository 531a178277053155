package frontend_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/router"
	"narad.dev/consume/router/internal/frontend"
)

// textGen draws strings rich in what JSON escapes: quotes, backslashes, control bytes, <, >,
// &, U+2028, U+2029, multi-byte runes and invalid UTF-8.
func textGen() *rapid.Generator[string] {
	pieces := []string{"a", "é", "\"", "\\", "\n", "\t", "\b", "\f", "\r", "\x00", "\x1f", "\x7f",
		"<", ">", "&", "\u2028", "\u2029", "\U0001F600", "\xff", "\xc3", "\xe2\x80", "\xed\xa0\x80", "/"}
	return rapid.Custom(func(t *rapid.T) string {
		if rapid.Bool().Draw(t, "raw") {
			return string(rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "bytes"))
		}
		var b []byte
		for _, p := range rapid.SliceOfN(rapid.SampledFrom(pieces), 0, 32).Draw(t, "pieces") {
			b = append(b, p...)
		}
		return string(b)
	})
}

// TestAppendStringIsEncodingJSONs: AppendString writes, byte for byte, what json.Marshal
// writes for the string, for strings and byte slices alike, and StringLen is its length.
func TestAppendStringIsEncodingJSONs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := textGen().Draw(t, "s")
		want, err := json.Marshal(s)
		require.NoError(t, err)
		prefix := []byte("x")
		require.Equal(t, "x"+string(want), string(frontend.AppendString(prefix, s)))
		require.Equal(t, string(want), string(frontend.AppendString(nil, []byte(s))))
		require.Equal(t, len(want), frontend.StringLen(s))
		require.Equal(t, len(want), frontend.StringLen([]byte(s)))
	})
}

// TestEscapes: the escapes themselves, named.
func TestEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"":       `""`,
		"a<b>&":  `"a\u003cb\u003e\u0026"`,
		"\x01\n": `"\u0001\n"`,
		"\u2028": `"\u2028"`,
		"\xff":   `"\ufffd"`,
		`"\`:     `"\"\\"`,
	} {
		require.Equal(t, want, string(frontend.AppendString(nil, in)), "%q", in)
		require.Equal(t, len(want), frontend.StringLen(in), "%q", in)
	}
}

// TestSlotsAgainstAModel: Acquire admits a request while its identity has fewer than max in
// flight (always, with no bound), and Release ends one, as a plain count per identity says.
func TestSlotsAgainstAModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		max := rapid.IntRange(-1, 3).Draw(t, "max")
		s := frontend.NewSlots(max)
		require.Equal(t, max, s.Max())
		model := map[string]int{}
		ids := []string{"a", "b", ""}
		for range rapid.IntRange(0, 50).Draw(t, "steps") {
			id := rapid.SampledFrom(ids).Draw(t, "id")
			if rapid.Bool().Draw(t, "acquire") || model[id] == 0 {
				want := max <= 0 || model[id] < max
				require.Equal(t, want, s.Acquire(id), "id %q with %d in flight of %d", id, model[id], max)
				if want {
					model[id]++
				}
				continue
			}
			s.Release(id)
			model[id]--
		}
	})
}

// TestSlotsConcurrent: under the race detector, concurrent requests of one identity never
// hold more than the bound, and every slot comes back.
func TestSlotsConcurrent(t *testing.T) {
	s := frontend.NewSlots(2)
	var held, most atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if !s.Acquire("id") {
					continue
				}
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				held.Add(-1)
				s.Release("id")
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, most.Load(), int64(2))
	require.True(t, s.Acquire("id") && s.Acquire("id"), "every slot came back")
	require.False(t, s.Acquire("id"))
}

func TestRemoteHost(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.7:5555"
	require.Equal(t, "10.0.0.7", frontend.RemoteHost(r))
	r.RemoteAddr = "[::1]:80"
	require.Equal(t, "::1", frontend.RemoteHost(r))
	r.RemoteAddr = "pipe"
	require.Equal(t, "pipe", frontend.RemoteHost(r))
}

// fakeNode answers Consume with msgs and err, running during first, and records releases
// with whether their context had ended.
type fakeNode struct {
	msgs     []router.Message
	err      error
	during   func()
	released []string
	ctxDone  []bool
}

func (f *fakeNode) Consume(ctx context.Context, topic string, opts router.ConsumeOptions) ([]router.Message, error) {
	if f.during != nil {
		f.during()
	}
	return f.msgs, f.err
}

func (f *fakeNode) Release(ctx context.Context, topic string, handle router.Handle) error {
	f.released = append(f.released, topic+"/"+handle.String())
	f.ctxDone = append(f.ctxDone, ctx.Err() != nil)
	return nil
}

func leased(n int) []router.Message {
	msgs := make([]router.Message, n)
	for i := range msgs {
		msgs[i] = router.Message{Offset: int64(i), Receipt: router.Handle{Offset: int64(i), Nonce: uint64(i + 1)}}
	}
	return msgs
}

// TestConsumeGivesBack: records come to the caller only while its client is there; taken
// as it left, or with an error, they are released (replayed ones, holding no lease, are not),
// on a context that has not ended.
func TestConsumeGivesBack(t *testing.T) {
	boom := errors.New("boom")
	replayed := router.Message{Offset: 9}
	for _, tc := range []struct {
		name     string
		msgs     []router.Message
		err      error
		leave    bool
		wantErr  error
		released []string
	}{
		{name: "delivered", msgs: leased(2)},
		{name: "nothing", msgs: nil},
		{name: "client left", msgs: leased(2), leave: true, wantErr: context.Canceled, released: []string{"t/0:0:1", "t/0:1:2"}},
		{name: "client left, nothing taken", leave: true},
		{name: "error with records", msgs: append(leased(1), replayed), err: boom, wantErr: boom, released: []string{"t/0:0:1"}},
		{name: "error", err: boom, wantErr: boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := &fakeNode{msgs: tc.msgs, err: tc.err}
			if tc.leave {
				f.during = cancel
			}
			got, err := frontend.Consume(ctx, f, "t", router.ConsumeOptions{})
			require.ErrorIs(t, err, tc.wantErr)
			if tc.wantErr == nil {
				require.Equal(t, tc.msgs, got)
			} else {
				require.Empty(t, got)
			}
			require.Equal(t, tc.released, f.released)
			for _, done := range f.ctxDone {
				require.False(t, done, "a release on an ended context would not reach a remote owner")
			}
		})
	}
}
