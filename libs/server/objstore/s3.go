package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// maxAttempts is how often a request is tried (the first time included):
// few, so that a store that is down fails a call in bounded time (about
// maxAttempts times Config.Timeout plus the backoff of a few seconds).
const maxAttempts = 3

// deleteBatch is the most keys one DeleteObjects request may name.
const deleteBatch = 1000

// s3Store is the Store of an S3-compatible server.
type s3Store struct {
	cfg    Config
	client *s3.Client
}

// Open returns the Store of cfg's bucket after checking that it can be
// reached with cfg's credentials (HeadBucket); with CreateBucket it
// creates a missing bucket. It fails when cfg is invalid or disabled, or
// the store does not answer within cfg.Timeout and the retries.
//
// Requests use path-style addressing (http://host:port/bucket/key, which
// every S3-compatible server takes) and compute and check checksums only
// where S3 requires them: the SDK's default of a CRC on every upload,
// sent as a trailer, is not understood by every S3-compatible server.
func Open(ctx context.Context, cfg Config) (Store, error) {
	if !cfg.Enabled() {
		return nil, errors.New("objstore: no endpoint (-remote-endpoint): tiered storage is off")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	id, secret, err := cfg.credentials()
	if err != nil {
		return nil, err
	}
	client := newClient(cfg, id, secret)
	s := &s3Store{cfg: cfg, client: client}
	if err := s.checkBucket(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// OpenUnchecked is Open without the check: for a store that did not
// answer at start (Open's error is not ErrRefused), so that the node runs
// and its uploads retry. A bucket missing at the first upload is created
// then, with CreateBucket.
func OpenUnchecked(cfg Config) (Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	id, secret, err := cfg.credentials()
	if err != nil {
		return nil, err
	}
	return &s3Store{cfg: cfg, client: newClient(cfg, id, secret)}, nil
}

// newClient is the S3 client of cfg.
func newClient(cfg Config, id, secret string) *s3.Client {
	return s3.New(s3.Options{
		Region:                     cfg.Region,
		BaseEndpoint:               aws.String(strings.TrimSuffix(cfg.Endpoint, "/")),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(id, secret, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		Retryer:                    retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = maxAttempts }),
		HTTPClient:                 awshttp.NewBuildableClient().WithTimeout(cfg.Timeout),
	})
}

// checkBucket makes sure the bucket exists, creating it with CreateBucket.
func (s *s3Store) checkBucket(ctx context.Context) error {
	b := s.cfg.Bucket
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &b})
	switch {
	case err == nil:
		return nil
	case !isStatus(err, http.StatusNotFound) && errorCode(err) != "NoSuchBucket":
		return s.fail("head bucket", "", err)
	case !s.cfg.CreateBucket:
		return fmt.Errorf("objstore: %w: bucket %q of %s does not exist (create it, or set -remote-create-bucket)", ErrRefused, b, s.cfg.Endpoint)
	}
	in := &s3.CreateBucketInput{Bucket: &b}
	if s.cfg.Region != "us-east-1" { // S3 refuses us-east-1 as a location constraint
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(s.cfg.Region)}
	}
	_, err = s.client.CreateBucket(ctx, in)
	var owned *types.BucketAlreadyOwnedByYou // created meanwhile, by another node
	if err != nil && !errors.As(err, &owned) {
		return s.fail("create bucket", "", err)
	}
	return nil
}

// Put implements Store. The body must be seekable: requests over plain
// HTTP are signed with the payload's SHA-256, which the SDK reads the
// body for before sending it, and a retry sends it again.
func (s *s3Store) Put(ctx context.Context, key string, body io.ReadSeeker, size int64) error {
	start, err := body.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("objstore: put %q: %w", key, err)
	}
	put := func() error {
		// UNSIGNED-PAYLOAD: the signature does not cover the body, so
		// the client does not hash every byte it uploads with SHA-256
		// (segments carry CRC-32Cs of their own, checked on every read).
		_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        &s.cfg.Bucket,
			Key:           aws.String(s.cfg.key(key)),
			Body:          body,
			ContentLength: &size,
		}, s3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware))
		return err
	}
	err = put()
	if err != nil && errorCode(err) == "NoSuchBucket" && s.cfg.CreateBucket {
		// A store that was down when the node started (OpenUnchecked).
		if cerr := s.checkBucket(ctx); cerr != nil {
			return cerr
		}
		if _, serr := body.Seek(start, io.SeekStart); serr != nil {
			return fmt.Errorf("objstore: put %q: %w", key, serr)
		}
		err = put()
	}
	if err != nil {
		return s.fail("put", key, err)
	}
	return nil
}

// GetRange implements Store.
func (s *s3Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	op := fmt.Sprintf("get [%d, +%d)", off, n)
	if n < 0 {
		op = fmt.Sprintf("get [%d, end)", off)
	}
	if off < 0 {
		return nil, fmt.Errorf("objstore: %s %q: negative offset", op, key)
	}
	if n == 0 {
		// An empty range has no Range header; the object's size says
		// whether off is inside it.
		return s.checkSize(ctx, op, key, off)
	}
	rng := fmt.Sprintf("bytes=%d-", off)
	if n > 0 {
		rng = fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.cfg.key(key)), Range: &rng})
	if err != nil {
		if isStatus(err, http.StatusRequestedRangeNotSatisfiable) {
			if n < 0 { // off may be the end of the object: an empty answer
				return s.checkSize(ctx, op, key, off)
			}
			return nil, fmt.Errorf("objstore: %s %q: range past the object's end: %w", op, key, io.ErrUnexpectedEOF)
		}
		return nil, s.fail(op, key, err)
	}
	defer out.Body.Close()
	if out.ContentRange == nil || *out.ContentRange == "" {
		// A server that ignores Range sends the whole object.
		if _, err := io.CopyN(io.Discard, out.Body, off); err != nil {
			return nil, s.short(op, key, err)
		}
	} else if l := aws.ToInt64(out.ContentLength); n > 0 && out.ContentLength != nil && l < n {
		// The object ends inside the range: S3 sends what there is.
		return nil, s.short(op, key, io.EOF)
	}
	if n < 0 {
		b, err := io.ReadAll(out.Body)
		if err != nil {
			return nil, s.fail(op, key, err)
		}
		return b, nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(out.Body, b); err != nil {
		return nil, s.short(op, key, err)
	}
	return b, nil
}

// checkSize answers an empty read at off: nil when off is at most the
// object's size.
func (s *s3Store) checkSize(ctx context.Context, op, key string, off int64) ([]byte, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.cfg.key(key))})
	if err != nil {
		return nil, s.fail(op, key, err)
	}
	if size := aws.ToInt64(out.ContentLength); off > size {
		return nil, fmt.Errorf("objstore: %s %q: offset past the object's %d bytes: %w", op, key, size, io.ErrUnexpectedEOF)
	}
	return []byte{}, nil
}

// short wraps the error of a body that ended early.
func (s *s3Store) short(op, key string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("objstore: %s %q: object shorter than the range: %w", op, key, io.ErrUnexpectedEOF)
	}
	return s.fail(op, key, err)
}

// Delete implements Store, in requests of up to 1,000 keys.
func (s *s3Store) Delete(ctx context.Context, keys ...string) error {
	for len(keys) > 0 {
		batch := keys[:min(len(keys), deleteBatch)]
		keys = keys[len(batch):]
		ids := make([]types.ObjectIdentifier, len(batch))
		for i, k := range batch {
			ids[i] = types.ObjectIdentifier{Key: aws.String(s.cfg.key(k))}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: &s.cfg.Bucket,
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			err = s.fail("delete", batch[0], err)
			if len(batch) > 1 {
				err = fmt.Errorf("%w (and %d more keys)", err, len(batch)-1)
			}
			return err
		}
		var errs []error
		for _, e := range out.Errors {
			if aws.ToString(e.Code) == "NoSuchKey" {
				continue
			}
			k := strings.TrimPrefix(aws.ToString(e.Key), s.cfg.keyPrefix())
			errs = append(errs, fmt.Errorf("objstore: delete %q: %s: %s", k, aws.ToString(e.Code), aws.ToString(e.Message)))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}

// List implements Store.
func (s *s3Store) List(ctx context.Context, prefix string) ([]Object, error) {
	var objs []Object
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.cfg.Bucket, Prefix: aws.String(s.cfg.key(prefix))})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.fail("list", prefix, err)
		}
		for _, o := range page.Contents {
			objs = append(objs, Object{
				Key:      strings.TrimPrefix(aws.ToString(o.Key), s.cfg.keyPrefix()),
				Size:     aws.ToInt64(o.Size),
				Modified: aws.ToTime(o.LastModified),
			})
		}
	}
	// S3 lists in key order already; not every compatible server does.
	slices.SortFunc(objs, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	return objs, nil
}

// fail wraps the error of operation op on key (or on the bucket when key
// is empty): a missing key wraps ErrNotFound, a refused signature says to
// check the credentials.
func (s *s3Store) fail(op, key string, err error) error {
	what := fmt.Sprintf("objstore: %s %q", op, key)
	if key == "" {
		what = fmt.Sprintf("objstore: %s %q at %s", op, s.cfg.Bucket, s.cfg.Endpoint)
	}
	switch {
	case key != "" && isNotFound(err):
		return fmt.Errorf("%s: %w (%w)", what, ErrNotFound, err)
	case isStatus(err, http.StatusForbidden), strings.Contains(errorCode(err), "Signature"):
		return fmt.Errorf("%s: %w: access denied, check the credentials (-remote-credentials-file or $%s, $%s): %w", what, ErrRefused, EnvAccessKeyID, EnvSecretAccessKey, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// isNotFound reports whether err says the object is missing: NoSuchKey,
// or a 404 without a body (the answer to HEAD) — not a missing bucket,
// which is no reason to think the object gone.
func isNotFound(err error) bool {
	switch errorCode(err) {
	case "NoSuchKey", "NotFound":
		return true
	case "NoSuchBucket":
		return false
	}
	return isStatus(err, http.StatusNotFound)
}

// errorCode returns the S3 error code of err ("" for none).
func errorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// isStatus reports whether err is an HTTP response with status code.
func isStatus(err error, code int) bool {
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == code
}
