package generic

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"strings"
	"time"

	"github.com/antchfx/xmlquery"
	"github.com/antchfx/xpath"
	"golang.org/x/text/encoding"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch/charset"
)

var xmlSpec = crawl.TaskSpec{
	Name:  XMLTask,
	Doc:   "an XML document: an item per `items` XPath match with its `fields` (XPath relative to the item), namespaces by prefix",
	Seeds: seedInputs,
	Params: []crawl.Param{
		urlsParam,
		baseURLParam,
		{Name: "items", Type: crawl.String, Required: true, Doc: "XPath of the item elements, e.g. //item or //s:story"},
		fieldsParam("field name → field spec, an XPath relative to the item such as title, @id, s:link/@href or string(…)", true),
		{Name: "namespaces", Type: crawl.Object, Doc: "prefix → namespace URI for the prefixes your XPaths use; they need not match the document's own prefixes (a default xmlns needs one too)"},
		keyParam,
		detailParam,
		detailTaskParam(""),
		encodingParam,
		headersParam,
	},
	Output:  commonOutput,
	Timeout: 60 * time.Second,
	Retries: 3,
	Check:   checker(buildXML),
}

// XML is the generic.xml task.
var XML = configTask(xmlSpec, buildXML, runXML)

type xmlConfig struct {
	common
	itemRules
	items *xpathExpr
	ns    map[string]string
	enc   encoding.Encoding
}

func buildXML(p crawl.Params) (*xmlConfig, []error) {
	c := &xmlConfig{}
	var errs, e []error
	c.common, errs = parseCommon(XMLTask, p)
	if v, ok := p["namespaces"]; ok && v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("param namespaces: want a mapping of prefix to namespace URI, like {dc: \"http://purl.org/dc/elements/1.1/\"}, got %s", describe(v)))
		} else {
			c.ns = map[string]string{}
			for _, prefix := range sortedKeys(m) {
				uri := strings.TrimSpace(str(m[prefix]))
				if uri == "" {
					errs = append(errs, fmt.Errorf("param namespaces.%s: want the namespace URI, got %s", prefix, describe(m[prefix])))
					continue
				}
				c.ns[prefix] = uri
			}
		}
	}
	if items := strings.TrimSpace(str(p["items"])); items != "" {
		x, err := compileXPath(items, c.ns, true)
		if err != nil {
			errs = append(errs, fmt.Errorf("param items: %v", err))
		} else {
			c.items = x
		}
	}
	c.itemRules, e = parseItemRules(XMLTask, p, srcXML, c.ns, "")
	errs = append(errs, e...)
	c.enc, e = parseEncodingParam(p["encoding"])
	errs = append(errs, e...)
	return c, errs
}

func runXML(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	return runPages(env, in, XMLTask, buildXML, func(c *xmlConfig, u string, start bool) (crawl.Result, error) {
		if c.items == nil {
			return crawl.Result{}, crawl.Permanentf("%s: param items is not set; give the XPath of the item elements", XMLTask)
		}
		return c.page(ctx, env, u)
	})
}

func (c *xmlConfig) page(ctx context.Context, env *crawl.Env, u string) (crawl.Result, error) {
	resp, err := c.fetch(ctx, env, u)
	if err != nil {
		return crawl.Result{}, err
	}
	root, err := parseXML(resp.Body, resp.Header.Get("Content-Type"), c.enc)
	if err != nil {
		return crawl.Result{}, crawl.Permanentf("%s: %s: %v", XMLTask, u, err)
	}
	var items []*xmlquery.Node
	c.items.eval(xmlquery.CreateXPathNavigator(root), func(nav xpath.NodeNavigator) bool {
		if xn := nav.(*xmlquery.NodeNavigator); xn.NodeType() == xpath.ElementNode {
			items = append(items, xn.Current())
		}
		return true
	})
	col := newCollector(c.itemRules, env, u, finalURL(resp, u))
	for _, n := range items {
		n := n
		if err := col.add(func(f *fieldSpec) ([]raw, string) { return f.fromXML(n) }, ""); err != nil {
			return crawl.Result{}, err
		}
	}
	return col.res, nil
}

// parseXML parses an XML body leniently (HTML entities, unclosed tags), in the encoding
// its BOM, declaration or Content-Type names, or the forced one.
func parseXML(body []byte, contentType string, forced encoding.Encoding) (*xmlquery.Node, error) {
	data, err := charset.XML(body, contentType, forced)
	if err != nil {
		return nil, err
	}
	root, err := xmlquery.ParseWithOptions(bytes.NewReader(data), xmlquery.ParserOptions{Decoder: &xmlquery.DecoderOptions{
		Strict:        false,
		AutoClose:     xml.HTMLAutoClose,
		Entity:        xml.HTMLEntity,
		CharsetReader: charset.PassThrough,
	}})
	if err != nil {
		return nil, fmt.Errorf("parse XML: %v", err)
	}
	return root, nil
}
