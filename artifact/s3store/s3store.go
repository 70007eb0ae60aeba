// Package s3store keeps a run's artifacts in Amazon S3, or in an S3-compatible
// server (MinIO, Ceph, SeaweedFS), under a URL such as
// s3://bucket/prefix/<flow>/<run id>: artifact key k is the object
// prefix/<flow>/<run id>/k.
//
// Credentials and region come from the AWS SDK's default chain (environment,
// shared config, web identity as IRSA sets it up, EKS Pod Identity's container
// credentials, the instance's role), so a pod whose service account may use the
// bucket needs nothing else. Without a region, the bucket's own is asked for.
//
// Writes are atomic: a value of up to PartSize bytes is one PutObject, which S3
// makes visible whole or not at all; a larger one is a multipart upload, completed
// only once every part is in (and aborted when a part fails), so a writer killed
// half-way leaves no object. A bucket lifecycle rule with
// AbortIncompleteMultipartUpload removes the parts such a writer leaves.
package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/internal/credential"
)

// Defaults of Options.
const (
	// DefaultPartSize is the size above which a value is uploaded in parts, and
	// the size of each part.
	DefaultPartSize = 16 << 20
	// MinPartSize is the smallest part S3 accepts (but for the last).
	MinPartSize = 5 << 20
	// DefaultConcurrency is how many parts of one value are uploaded at once.
	DefaultConcurrency = 4
	// maxParts is the most parts S3 accepts in one upload.
	maxParts = 10000
)

// Options configure a Store.
type Options struct {
	// Endpoint is the URL of an S3-compatible server, such as
	// http://minio.storage:9000; "" for AWS's own endpoints (or the
	// AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL of the environment). Objects are
	// then addressed by path (endpoint/bucket/key), which every S3-compatible
	// server supports.
	Endpoint string
	// PartSize is the size above which a value is uploaded in parts of this
	// size; DefaultPartSize when 0, at least MinPartSize.
	PartSize int64
	// Concurrency is how many parts are uploaded at once; DefaultConcurrency
	// when 0 or less.
	Concurrency int
	// HTTPClient sends the requests; the SDK's own when nil.
	HTTPClient aws.HTTPClient
}

// Store is an artifact.Store in an S3 bucket.
type Store struct {
	client      *s3.Client
	bucket      string
	prefix      string // "" or ending in "/"
	partSize    int64
	concurrency int
	// checksum is the algorithm of a multipart upload's parts: CRC32 on AWS,
	// none on S3-compatible servers, many of which do not support it.
	checksum types.ChecksumAlgorithm
}

var (
	_ artifact.Store  = (*Store)(nil)
	_ artifact.Lister = (*Store)(nil)
)

// ParseURL splits s3://bucket/prefix into the bucket and the prefix (without
// leading or trailing '/'; "" for none).
func ParseURL(raw string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(raw, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q is not an S3 URL: write s3://bucket/prefix", raw)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%q names no bucket: write s3://bucket/prefix", raw)
	}
	return bucket, strings.Trim(prefix, "/"), nil
}

// New returns the store at url, s3://bucket/prefix. It loads the AWS
// configuration but sends no request, unless no region is configured and o
// names no endpoint: it then asks S3 where the bucket is.
func New(ctx context.Context, url string, o Options) (*Store, error) {
	bucket, prefix, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.PartSize < MinPartSize {
		return nil, fmt.Errorf("part size %d: S3 takes parts of at least %d bytes", o.PartSize, MinPartSize)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Endpoint != "" {
		if err := CheckEndpoint(o.Endpoint); err != nil {
			return nil, err
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration for %s: %w", url, err)
	}
	custom := o.Endpoint != "" || cfg.BaseEndpoint != nil || os.Getenv("AWS_ENDPOINT_URL_S3") != ""
	if cfg.Region == "" {
		if custom {
			// S3-compatible servers take any region in the signature.
			cfg.Region = "us-east-1"
		} else if cfg.Region, err = bucketRegion(ctx, cfg, bucket, o.HTTPClient); err != nil {
			return nil, err
		}
	}
	s := &Store{bucket: bucket, partSize: o.PartSize, concurrency: o.Concurrency, checksum: types.ChecksumAlgorithmCrc32}
	if prefix != "" {
		s.prefix = prefix + "/"
	}
	if custom {
		s.checksum = ""
	}
	s.client = s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		if so.BaseEndpoint != nil {
			so.UsePathStyle = true
			so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
		if o.HTTPClient != nil {
			so.HTTPClient = o.HTTPClient
		}
	})
	return s, nil
}

// CheckEndpoint refuses an endpoint that is not an http or https URL of a host.
func CheckEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("S3 endpoint %q: write the server's URL, such as http://minio.storage:9000, without a user or password", credential.Redact("", endpoint))
	}
	return nil
}

// bucketRegion asks S3 where bucket is: a HeadBucket without credentials, sent to
// us-east-1, is answered (success, redirect or refusal alike) with the
// bucket's region in the X-Amz-Bucket-Region header.
func bucketRegion(ctx context.Context, cfg aws.Config, bucket string, client aws.HTTPClient) (string, error) {
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.Region = "us-east-1"
		o.Credentials = aws.AnonymousCredentials{}
		o.RetryMaxAttempts = 1
		if client != nil {
			o.HTTPClient = client
		}
	})
	out, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	if err == nil && out.BucketRegion != nil && *out.BucketRegion != "" {
		return *out.BucketRegion, nil
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		if region := re.Response.Header.Get("X-Amz-Bucket-Region"); region != "" {
			return region, nil
		}
		if re.HTTPStatusCode() == http.StatusNotFound {
			return "", fmt.Errorf("S3 bucket %s does not exist: create it, or name another in the artifact store", bucket)
		}
	}
	if err == nil {
		err = errors.New("S3 did not say")
	}
	return "", fmt.Errorf("no AWS region configured, and asking S3 where bucket %s is failed (%v): set AWS_REGION", bucket, err)
}

// URL returns the store's location, s3://bucket/prefix.
func (s *Store) URL() string { return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/") }

// Location returns the s3:// URL of key.
func (s *Store) Location(key string) string {
	if key == "" {
		return s.URL()
	}
	return "s3://" + s.bucket + "/" + s.prefix + key
}

// Put stores data as the object of key: in one PutObject, or, above the part
// size, in a multipart upload completed once every part is in.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := artifact.CheckKey(key); err != nil {
		return err
	}
	if int64(len(data)) <= s.partSize {
		_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        aws.String(s.bucket),
			Key:           aws.String(s.prefix + key),
			Body:          bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))),
			ContentType:   aws.String("application/json"),
		})
		return s.fail("writing", key, err)
	}
	return s.fail("writing", key, s.multipart(ctx, s.prefix+key, data))
}

// multipart uploads data in parts, at most s.concurrency at once, and completes
// the upload only when every part is in; on any failure it aborts the upload,
// so that no part of it is ever visible.
func (s *Store) multipart(ctx context.Context, key string, data []byte) (err error) {
	size := s.partSize
	for int64(len(data)) > size*maxParts {
		size *= 2
	}
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket:            aws.String(s.bucket),
		Key:               aws.String(key),
		ContentType:       aws.String("application/json"),
		ChecksumAlgorithm: s.checksum,
	})
	if err != nil {
		return err
	}
	id := created.UploadId
	defer func() {
		if err == nil {
			return
		}
		// The upload's own context may be what ended it; the abort gets its own.
		abortCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = s.client.AbortMultipartUpload(abortCtx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: id,
		})
	}()

	n := (int64(len(data)) + size - 1) / size
	parts := make([]types.CompletedPart, n)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, s.concurrency)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			part := data[i*size : min(int64(len(data)), (i+1)*size)]
			num := aws.Int32(int32(i + 1))
			out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
				Bucket:            aws.String(s.bucket),
				Key:               aws.String(key),
				UploadId:          id,
				PartNumber:        num,
				Body:              bytes.NewReader(part),
				ContentLength:     aws.Int64(int64(len(part))),
				ChecksumAlgorithm: s.checksum,
			})
			if err != nil {
				cancel(fmt.Errorf("part %d of %d: %w", i+1, n, err))
				return
			}
			parts[i] = types.CompletedPart{PartNumber: num, ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(s.bucket),
		Key:             aws.String(key),
		UploadId:        id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	return err
}

// Get returns the object of key; an error wrapping fs.ErrNotExist when there is
// none.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := artifact.CheckKey(key); err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)})
	if err != nil {
		return nil, s.fail("reading", key, err)
	}
	defer out.Body.Close()
	var buf bytes.Buffer
	if out.ContentLength != nil && *out.ContentLength > 0 {
		buf.Grow(int(*out.ContentLength))
	}
	if _, err := io.Copy(&buf, out.Body); err != nil {
		return nil, s.fail("reading", key, err)
	}
	return buf.Bytes(), nil
}

// List returns the objects directly under key dir that are artifacts.
func (s *Store) List(ctx context.Context, dir string) ([]artifact.Entry, error) {
	if err := artifact.CheckKey(dir); err != nil {
		return nil, err
	}
	prefix := s.prefix + dir + "/"
	var entries []artifact.Entry
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket), Prefix: aws.String(prefix), Delimiter: aws.String("/"),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, s.fail("listing", dir, err)
		}
		for _, o := range page.Contents {
			base := strings.TrimPrefix(aws.ToString(o.Key), prefix)
			if !artifact.IsArtifact(base) {
				continue
			}
			entries = append(entries, artifact.Entry{Key: dir + "/" + base, Size: aws.ToInt64(o.Size)})
		}
	}
	return entries, nil
}

// fail says what failed on which object, and turns S3's "no such key" into
// fs.ErrNotExist and its common refusals into what to do.
func (s *Store) fail(doing, key string, err error) error {
	if err == nil {
		return nil
	}
	at := s.Location(key)
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return fmt.Errorf("%s: %w", at, fs.ErrNotExist)
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchBucket":
			return fmt.Errorf("%s %s: bucket %s does not exist: create it, or name another in the artifact store", doing, at, s.bucket)
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken":
			return fmt.Errorf("%s %s: %s: give the step's credentials (its service account's IAM role, through IRSA or EKS Pod Identity) s3:GetObject and s3:PutObject on the bucket: %w", doing, at, api.ErrorCode(), err)
		}
	}
	return fmt.Errorf("%s %s: %w", doing, at, err)
}
