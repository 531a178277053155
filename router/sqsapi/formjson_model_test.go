package sqsapi

import (
	"encoding/json"
	"net/url"
	"strconv"
)

// formJSONByMaps is formJSON as it was written first, through maps and encoding/json: the
// model formJSON must agree with (the same JSON value, the same errors).
func formJSONByMaps(action string, form url.Values) ([]byte, error) {
	fields := formSchemas[action]
	obj, err := formObject(formTree(form, fields), "", fields)
	if err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

func formObject(n *formNode, prefix string, fields []formField) (map[string]any, error) {
	obj := map[string]any{}
	for _, f := range fields {
		kid := n.kid(f.key)
		if kid == nil {
			continue
		}
		param := prefix + f.key
		switch f.kind {
		case formString:
			if v, ok := kid.text(); ok {
				obj[f.member] = v
			}
		case formInt:
			v, ok := kid.text()
			if !ok {
				continue
			}
			i, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, &apiError{code: codeInvalidParameterValue, cause: errWrongType,
					msg: "Value " + strconv.Quote(truncate(v)) + " for parameter " + param + " is invalid. Reason: it must be an integer."}
			}
			obj[f.member] = i
		case formList:
			var list []string
			for _, item := range kid.indexed() {
				if v, ok := item.text(); ok {
					list = append(list, v)
				}
			}
			obj[f.member] = list
		case formMap:
			m := map[string]string{}
			for i, item := range kid.indexed() {
				k, ok := item.kid(f.mapKey).text()
				if !ok {
					return nil, missing(param + "." + strconv.Itoa(i+1) + "." + f.mapKey)
				}
				if _, dup := m[k]; dup {
					return nil, invalidValue(param, strconv.Quote(truncate(k)), strconv.Quote(truncate(k))+" is repeated.")
				}
				m[k], _ = item.kid(f.mapValue).text()
			}
			obj[f.member] = m
		case formAttrs:
			attrs, err := formAttributes(kid, param)
			if err != nil {
				return nil, err
			}
			obj[f.member] = attrs
		case formEntries:
			var entries []map[string]any
			for i, item := range kid.indexed() {
				e, err := formObject(item, param+"."+strconv.Itoa(i+1)+".", f.entry)
				if err != nil {
					return nil, err
				}
				entries = append(entries, e)
			}
			if entries == nil {
				entries = []map[string]any{}
			}
			obj[f.member] = entries
		}
	}
	return obj, nil
}

// formAttributes reads a map of message attributes: Key.N.Name and Key.N.Value.DataType,
// .StringValue, .BinaryValue (base64), .StringListValue.M and .BinaryListValue.M.
func formAttributes(n *formNode, param string) (map[string]map[string]any, error) {
	attrs := map[string]map[string]any{}
	for i, item := range n.indexed() {
		name, ok := item.kid("Name").text()
		if !ok {
			return nil, missing(param + "." + strconv.Itoa(i+1) + ".Name")
		}
		if _, dup := attrs[name]; dup {
			return nil, invalidValue(param, strconv.Quote(truncate(name)), "Message attribute name "+strconv.Quote(truncate(name))+" is repeated.")
		}
		v := map[string]any{}
		value := item.kid("Value")
		for _, member := range []string{"DataType", "StringValue", "BinaryValue"} {
			if s, ok := value.kid(member).text(); ok {
				v[member] = s
			}
		}
		for _, list := range []string{"StringListValue", "BinaryListValue"} {
			if items := value.kid(list).indexed(); len(items) > 0 {
				values := make([]string, 0, len(items))
				for _, it := range items {
					s, _ := it.text()
					values = append(values, s)
				}
				v[list+"s"] = values
			}
		}
		attrs[name] = v
	}
	return attrs, nil
}
